// kiln's intra-op thread pool (KILN_NUM_THREADS). One parallel job runs at a time: a caller that
// finds the pool busy runs its loop on its own thread, so many caller threads never oversubscribe
// the cores. The calling thread always takes part in its own job.
// Workers, and a caller waiting for its workers, poll for a while (twice their part of the last
// job, 50 us to 1 ms; see thread_pool.cpp) before they sleep on a condition variable: waking a
// sleeping thread took about 20 us on a virtualized Zen 3, as long as a whole 128^3 GEMM's share,
// and jobs of a serving loop follow each other closely.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, sized from KILN_NUM_THREADS (default: the number of cores).
  static ThreadPool& global();

  int num_threads() const { return num_threads_; }
  // Resizes the pool (waits for a running job to finish first).
  void set_num_threads(int n);

  // Calls fn over disjoint ranges covering [0, n), each at least `grain` long (except the last).
  // Runs inline when n is small, the pool has one thread, or the pool is busy with another job.
  void parallel_for(int64_t n, int64_t grain, const RangeFn& fn);
  // How many jobs ran inline because the pool was busy (for stats and tests).
  int64_t busy_fallbacks() const { return busy_fallbacks_.load(); }

 private:
  void start_workers(int n);
  void stop_workers();
  void worker_loop();
  void run_chunks(const RangeFn* fn, int64_t n, int64_t chunk);

  // Polls `ready` for up to `spin` (pausing between reads); whether it became true.
  static bool spin_until(const std::function<bool()>& ready, std::chrono::nanoseconds spin);

  int num_threads_ = 1;
  std::mutex job_mu_;  // held by the caller whose job is running
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
  // Written under mu_ (the condition variables' predicates read them), atomic so that a polling
  // thread can read them without it.
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_workers_{0};
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> busy_fallbacks_{0};
  std::exception_ptr error_;
};

}  // namespace kiln
