// kiln's intra-op thread pool (KILN_NUM_THREADS). One parallel job runs at a time: a caller that
// finds the pool busy runs its loop on its own thread, so many caller threads never oversubscribe
// the cores. The calling thread always takes part in its own job.
// Workers, and a caller waiting for its workers, poll for a while (twice their part of the last
// job, and a worker at least twice the last parallel_for job's length, 50 us to 1 ms; see
// thread_pool.cpp) before they sleep on a condition variable: waking a sleeping thread took about
// 20 us on a virtualized Zen 3, as long as a whole 128^3 GEMM's share, and jobs of a serving loop
// follow each other closely.
// run_parts is a second way in for jobs of a few microseconds: a static split whose parts reach
// the workers through cache lines of their own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, sized from KILN_NUM_THREADS (default: the cores this process may run
  // on).
  static ThreadPool& global();

  int num_threads() const { return num_threads_; }
  // Resizes the pool (waits for a running job to finish first). Where the system cannot start
  // that many threads, the pool goes back to its size before and DeviceError says so.
  void set_num_threads(int n);

  // Calls fn over disjoint ranges covering [0, n), each at least `grain` long (except the last).
  // Runs inline when n is small, the pool has one thread, or the pool is busy with another job.
  void parallel_for(int64_t n, int64_t grain, const RangeFn& fn);
  // How many jobs ran inline because the pool was busy (for stats and tests).
  int64_t busy_fallbacks() const { return busy_fallbacks_.load(); }

  // How many run_parts parts the caller took back from a worker that had not started them (for
  // stats and tests; the first is logged at info, and parts taken back from workers that were
  // awake are logged at warn once starved_warrants_warning: those workers have no core to run on).
  int64_t parts_taken_back() const { return parts_taken_back_.load(); }
  // Of those, the parts taken back from workers that were awake (started, and not asleep): the
  // count starved_warrants_warning weighs.
  int64_t parts_taken_back_awake() const {
    return starved_taken_back_.load(std::memory_order_relaxed);
  }
  // Whether `starved` parts taken back from awake workers, of `posted` parts posted to workers,
  // point at a pool with more threads than cores: at least 100 of them, and at least 1% of the
  // parts. A worker on a virtual machine is preempted by its host now and then (about one part in
  // 10^4 in gemm_bench on a 2-CPU KVM guest); one without a core of its own misses most parts.
  static bool starved_warrants_warning(int64_t starved, int64_t posted);
  // busy_fallbacks and parts_taken_back summed over every pool of the process (x86::stats()).
  static int64_t busy_fallbacks_total();
  static int64_t parts_taken_back_total();
  // Tests: at most `more` worker threads (every pool together) beyond those running now; a start
  // past that fails as one the system refuses (std::system_error, EAGAIN). Negative: no limit
  // (the default). (Lowering the process's RLIMIT_AS instead made other allocations fail too.)
  static void limit_more_workers_for_testing(int64_t more);

  // The most bytes a run_parts payload may take.
  static constexpr size_t kPartPayloadBytes = 56;
  // Calls F(payload, part) for every part in [0, parts): part 0 on the calling thread, part i on
  // worker i (parts past the workers after part 0, on the caller). Each worker finds its part, with
  // a copy of the payload, on a cache line that only the caller writes, and answers on one that
  // only it writes: two lines cross between the cores per worker, where parallel_for's job (its
  // parameters, a shared chunk counter, a counted join) passes several, one after another. Two
  // threads on a 2-vCPU Intel Xeon VM, a job of two empty parts: 0.40 us against parallel_for's
  // 0.76-0.87 us; two parts of 0.9 us: 1.15-1.39 us against 1.80-1.94 us (parallel_for measured
  // when its workers still joined a job under the pool's mutex); since a worker reads no clock
  // between seeing its part and answering, nor the caller before its first polls (kQuickPolls), two
  // empty parts take 0.24-0.30 us there, about one round trip of a line between the two cores (0.31
  // us measured alone). A part its worker has not started when the caller has spent as long again
  // as on its own part (and its quick polls), the caller claims and runs (a worker without a core:
  // more threads than the process may use). F must not throw. Runs every part on the caller, in
  // order, when the pool is busy with another job (counted in busy_fallbacks).
  template <class Payload, void (*F)(const Payload&, int part) noexcept>
  void run_parts(int parts, const Payload& payload) {
    static_assert(std::is_trivially_copyable_v<Payload> && sizeof(Payload) <= kPartPayloadBytes &&
                  alignof(Payload) <= 8);
    run_parts_raw(parts, &call_part<Payload, F>, &payload, sizeof(Payload));
  }

 private:
  using PartFn = void (*)(const void* payload, int part);
  template <class Payload, void (*F)(const Payload&, int part) noexcept>
  static void call_part(const void* bytes, int part) {
    Payload payload;
    std::memcpy(static_cast<void*>(&payload), bytes, sizeof(Payload));
    F(payload, part);
  }
  void run_parts_raw(int parts, PartFn fn, const void* payload, size_t size);
  // Claims the part posted on worker `index`'s line as post `seq` (false: already claimed, by
  // the caller).
  bool claim_part(int index, uint64_t seq);
  // Runs the part posted on worker `index`'s line (seq: its number there) and answers.
  void run_posted_part(int index, uint64_t seq);
  // Wakes the workers asleep among [1, posted) (after the posts); whether any was.
  bool wake_sleeping_workers(int posted);
  // Logs a part taken back from a worker (woke: one that was asleep); see parts_taken_back. The
  // caller's, under job_mu_.
  void log_part_taken_back(int index, bool woke, std::chrono::nanoseconds waited);

  // A worker leaves a parallel_for job it counted itself in (see job_open_).
  void leave_job();

  // Starts workers 1..n-1. Where one cannot start (the system's thread or memory limits), the pool
  // keeps the workers started before it (num_threads_ counts them) and the failure is returned;
  // empty when all started.
  std::string start_workers(int n);
  void stop_workers();
  void worker_loop(int index);
  void run_chunks(const RangeFn* fn, int64_t n, int64_t chunk);

  // Polls `ready` for up to `spin` (pausing between reads); whether it became true. `last_read`,
  // where given, gets the last time it read the clock (every 16 polls, about 0.6 us).
  static bool spin_until(const std::function<bool()>& ready, std::chrono::nanoseconds spin,
                         std::chrono::steady_clock::time_point* last_read = nullptr);

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
  // parallel_for: the running job's generation while workers may join it, 0 once every chunk is
  // taken. A worker joins without mu_ (each join took mu_, so at every job's start the workers
  // queued on it, through a futex wake-up each where they collided): it counts itself in
  // busy_workers_, then reads the parameters (fn_, n_, chunk_) only if its job is still open; the
  // caller closes the job, then waits for busy_workers_ to reach 0 (sequentially consistent: either
  // the worker sees the job closed or the caller sees it counted). The last worker out notifies the
  // caller through mu_.
  std::atomic<uint64_t> job_open_{0};
  std::atomic<int> busy_workers_{0};
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  // The last parallel_for job's length (ns): workers poll as long after each job (see spin_after).
  std::atomic<int64_t> last_job_ns_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> busy_fallbacks_{0};
  std::exception_ptr error_;

  // run_parts: per worker (index 1..num_threads-1; 0 unused), the line the caller posts on, the
  // line the worker answers on, and the worker's `sleeping` flag. A side about to sleep (the
  // worker for a post, the caller for answers) exchanges its flag to 1 under mu_ and then checks
  // the other's line; the other side, after storing to its line, reads the flag with a
  // read-modify-write: either that reads 1 (and it notifies through mu_) or it comes first in
  // the flag's order, and the sleeper's exchange then sees its store (no fences: ThreadSanitizer
  // does not model them).
  struct alignas(64) PartPost {
    std::atomic<uint64_t> seq{0};
    alignas(8) unsigned char payload[kPartPayloadBytes];
  };
  struct alignas(64) PartAnswer {
    std::atomic<uint64_t> seq{0};
  };
  // The last post each worker's part was claimed for, by the worker as it starts it or by the
  // caller (see run_parts_raw); a line of its own, which only the worker touches while it keeps
  // up, so that its claim is a local compare-and-swap.
  struct alignas(64) PartClaim {
    std::atomic<uint64_t> seq{0};
  };
  struct alignas(64) PartSleep {  // a line of its own: the caller's RMW keeps it each job
    // Set from the worker's creation until its loop starts: a thread not yet scheduled is as
    // late as one asleep, not starved of a core. On a 2-vCPU VM a new pool's worker first ran
    // 0.1-3.6 ms (once 11 ms) after its creation while the caller kept posting; the parts taken
    // back meanwhile (up to ~2500) had counted as starved and set off the warning on their own.
    std::atomic<int> sleeping{1};
  };
  std::unique_ptr<PartPost[]> posts_;
  std::unique_ptr<PartAnswer[]> answers_;
  std::unique_ptr<PartClaim[]> claims_;
  std::unique_ptr<PartSleep[]> sleeps_;
  std::atomic<int64_t> parts_taken_back_{0};
  // The job's function: written by the caller under job_mu_ before it posts, and only when it
  // changes, so that the line stays shared while one kind of job repeats.
  alignas(64) PartFn part_fn_ = nullptr;
  alignas(64) uint64_t part_seq_ = 0;  // the last job's number (the caller's, under job_mu_)
  // The caller's, under job_mu_: parts posted to workers, those taken back from workers that
  // were not asleep, and what has been logged of them.
  int64_t parts_posted_ = 0;
  std::atomic<int64_t> starved_taken_back_{0};  // read by parts_taken_back_awake()
  bool logged_first_ = false;
  bool warned_starved_ = false;
  alignas(64) std::atomic<int> caller_waiting_{0};
};

}  // namespace kiln
