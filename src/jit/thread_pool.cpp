#include "jit/thread_pool.h"
#include "support/log.h"

#include <kiln/errors.h>
#include <kiln/options.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

namespace kiln {

namespace {

// How long a thread polls before it sleeps: twice what its own part of the last job took, within
// [kMinSpin, kMaxSpin]. A thread that sleeps between jobs pays a wake-up (about 20 us), and on a
// virtual machine an idle vCPU can lose its place on the host. Measured on a 2-vCPU Zen 3 under
// Firecracker, GEMMs of 0.3-2 ms (128^3 to 512^3, 64 and 96 x1024x1024) on 2 threads against
// OpenBLAS (whose threads spin ~0.1 s after a call), paired 20 ms bursts, alternate runs of the
// two rules: with a fixed 50 us poll, medians 0.74-1.25x and lower quartiles down to 0.55x (in an
// earlier, noisier hour 0.50-0.70x throughout); with this rule 0.97-1.77x, lower quartiles mostly
// 0.9-1.0x. The poll costs at most twice the job's own time, and never more than kMaxSpin, of CPU
// after each job.
constexpr std::chrono::nanoseconds kMinSpin = std::chrono::microseconds{50};
constexpr std::chrono::nanoseconds kMaxSpin = std::chrono::microseconds{1000};
// run_parts: how long at least a caller done with its own part waits for a worker to claim its
// part before it runs it (a spinning worker claims one 0.2-0.3 us after the post).
constexpr std::chrono::nanoseconds kMinClaimWait = std::chrono::microseconds{1};
// run_parts: how often a caller done with its own part polls for the workers' answers before it
// reads the clock (about 1 us with pauses of ~13 ns). A worker that keeps up answers about a
// line's round trip between the cores after the caller's part ends (0.31 us on a 2-vCPU Xeon VM);
// the caller's reads of the clock before its first poll (~25 ns each, an lfence and rdtsc, two
// of them and a std::function in between) held back every such call's return: paired in one
// process, 64^3 on two threads 1.96 -> 1.83 us and 1.88 -> 1.76 us with the worker's change
// below (worker_loop: 1.93 / 1.84 us with that alone), a job of two empty parts 0.46 -> 0.30 us.
constexpr int kQuickPolls = 64;
// Parts taken back from workers awake but late before that is logged as a warning, and the
// share of the parts posted to workers (1 in kStarvedWarnShare) they must make up.
constexpr int64_t kStarvedWarnAfter = 100;
constexpr int64_t kStarvedWarnShare = 100;

// Every pool's busy_fallbacks and parts_taken_back, for the process's stats.
std::atomic<int64_t> g_busy_fallbacks{0};
std::atomic<int64_t> g_parts_taken_back{0};

// Worker threads running in every pool, and the most that may (limit_more_workers_for_testing).
std::atomic<int64_t> g_workers_alive{0};
std::atomic<int64_t> g_worker_limit{-1};

// Starts a worker thread running f; past the testing limit, fails as the system refuses one.
template <typename F>
std::thread start_worker_thread(F&& f) {
  const int64_t limit = g_worker_limit.load();
  if (limit >= 0 && g_workers_alive.load() >= limit)
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
  std::thread t(std::forward<F>(f));
  g_workers_alive.fetch_add(1);
  return t;
}

// `at_least`: a worker's poll after a parallel_for job also covers the last job's length.
std::chrono::nanoseconds spin_after(std::chrono::steady_clock::time_point work_start,
                                    std::chrono::nanoseconds at_least = {}) {
  return std::clamp<std::chrono::nanoseconds>(
      2 * std::max<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - work_start,
                                             at_least),
      kMinSpin, kMaxSpin);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

bool ThreadPool::spin_until(const std::function<bool()>& ready, std::chrono::nanoseconds spin,
                            std::chrono::steady_clock::time_point* last_read) {
  auto now = std::chrono::steady_clock::now();
  const auto deadline = now + spin;
  for (;;) {
    // 16 polls (about 0.6 us with pauses) between reads of the clock (about 25 ns each).
    for (int i = 0; i < 16; ++i) {
      if (ready()) {
        if (last_read) *last_read = now;
        return true;
      }
      cpu_relax();
    }
    now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (last_read) *last_read = now;
      return ready();
    }
  }
}

int64_t ThreadPool::busy_fallbacks_total() { return g_busy_fallbacks.load(); }

int64_t ThreadPool::parts_taken_back_total() { return g_parts_taken_back.load(); }

void ThreadPool::limit_more_workers_for_testing(int64_t more) {
  g_worker_limit = more < 0 ? -1 : g_workers_alive.load() + more;
}

ThreadPool::ThreadPool(int num_threads) {
  const int want = std::max(1, num_threads);
  const std::string failure = start_workers(want);
  if (!failure.empty())
    KILN_LOG_AT(warn) << "thread pool: could not start thread " << num_threads_ + 1 << " of "
                      << want << " (" << failure << "); running with " << num_threads_
                      << (num_threads_ == 1 ? " thread" : " threads");
}

ThreadPool::~ThreadPool() { stop_workers(); }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(global_options().num_threads);
  return pool;
}

std::string ThreadPool::start_workers(int n) {
  num_threads_ = n;
  stop_ = false;
  posts_ = std::make_unique<PartPost[]>(size_t(n));
  answers_ = std::make_unique<PartAnswer[]>(size_t(n));
  claims_ = std::make_unique<PartClaim[]>(size_t(n));
  sleeps_ = std::make_unique<PartSleep[]>(size_t(n));
  workers_.reserve(size_t(n - 1));  // a started thread is never dropped by a throwing push_back
  for (int i = 1; i < n; ++i) {
    try {
      workers_.push_back(start_worker_thread([this, i] { worker_loop(i); }));
    } catch (const std::system_error& e) {  // EAGAIN: out of threads or of memory for a stack
      num_threads_ = i;
      return e.what();
    }
  }
  return {};
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  g_workers_alive.fetch_sub(static_cast<int64_t>(workers_.size()));
  workers_.clear();
}

void ThreadPool::set_num_threads(int n) {
  std::lock_guard<std::mutex> job(job_mu_);
  const int before = num_threads_, want = std::max(1, n);
  stop_workers();
  const std::string failure = start_workers(want);
  if (failure.empty()) return;
  const int started = num_threads_;
  stop_workers();
  start_workers(before);  // these ran before; should they not start now, the pool has fewer
  throw DeviceError("set_num_threads: could not start thread " + std::to_string(started + 1) +
                    " of " + std::to_string(want) + " (" + failure + "); the pool keeps " +
                    std::to_string(num_threads_) + (num_threads_ == 1 ? " thread" : " threads"));
}

void ThreadPool::run_chunks(const RangeFn* fn, int64_t n, int64_t chunk) {
  for (;;) {
    int64_t begin = next_.fetch_add(chunk);
    if (begin >= n) return;
    int64_t end = std::min(n, begin + chunk);
    try {
      (*fn)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop(int index) {
  PartPost& post = posts_[size_t(index)];
  PartSleep& sleep = sleeps_[size_t(index)];
  sleep.sleeping.store(0, std::memory_order_relaxed);  // running (see PartSleep)
  uint64_t seen = 0, part_seen = 0;
  std::chrono::nanoseconds spin = kMinSpin;
  std::chrono::steady_clock::time_point started;
  for (;;) {
    const RangeFn* fn = nullptr;
    int64_t n = 0, chunk = 0;
    {
      // A posted part first: its line is the one that changes.
      auto ready = [&] {
        return post.seq.load(std::memory_order_acquire) != part_seen || stop_ ||
               generation_ != seen;
      };
      // When the work began, for the next poll's length (spin_after), to within a poll's clock
      // reads: a read of the clock between seeing a part and starting it (an lfence and rdtsc,
      // ~25 ns) delayed every part (paired, 64^3 on two threads 1.96 -> 1.93 us and 1.88 ->
      // 1.84 us, a job of two empty parts 0.46 -> 0.42 us).
      if (!spin_until(ready, spin, &started)) {
        std::unique_lock<std::mutex> lock(mu_);
        sleep.sleeping.exchange(1, std::memory_order_acq_rel);  // see PartSleep
        work_cv_.wait(lock, ready);
        sleep.sleeping.store(0, std::memory_order_relaxed);
        started = std::chrono::steady_clock::now();  // after a wake-up of some 20 us anyway
      }
      if (stop_) return;
      const uint64_t part = post.seq.load(std::memory_order_acquire);
      if (part != part_seen) {
        part_seen = part;
        if (!claim_part(index, part)) continue;  // the caller ran it
        run_posted_part(index, part);
        spin = spin_after(started);
        continue;
      }
      // A parallel_for job, joined without mu_ (see job_open_): counted first, then its
      // parameters read only if it is still open, so that the caller waits for this worker.
      const uint64_t job = generation_.load(std::memory_order_acquire);
      if (job == seen) continue;
      seen = job;
      busy_workers_.fetch_add(1, std::memory_order_seq_cst);
      if (job_open_.load(std::memory_order_seq_cst) != job) {
        leave_job();  // woke after that job had closed
        continue;
      }
      fn = fn_;
      n = n_;
      chunk = chunk_;
    }
    run_chunks(fn, n, chunk);
    // A worker that came late and found every chunk taken polls as long as the caller's jobs
    // take, not as long as its empty share (or it sleeps through the next job's start).
    spin =
        spin_after(started, std::chrono::nanoseconds(last_job_ns_.load(std::memory_order_relaxed)));
    leave_job();
  }
}

void ThreadPool::leave_job() {
  if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Through mu_, as the caller checks busy_workers_ under it before it waits.
  { std::lock_guard<std::mutex> lock(mu_); }
  done_cv_.notify_all();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
  if (!job.owns_lock()) {
    busy_fallbacks_.fetch_add(1);
    g_busy_fallbacks.fetch_add(1);
    fn(0, n);
    return;
  }
  // About four chunks per thread balances load without much scheduling cost.
  int64_t chunks = std::min<int64_t>(n / grain, int64_t{4} * num_threads_);
  chunks = std::max<int64_t>(1, chunks);
  const auto start = std::chrono::steady_clock::now();
  {
    // Under mu_ for the workers asleep on work_cv_, whose predicate reads generation_.
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = (n + chunks - 1) / chunks;
    next_.store(0);
    error_ = nullptr;
    const uint64_t job = generation_.load(std::memory_order_relaxed) + 1;
    job_open_.store(job, std::memory_order_seq_cst);
    generation_.store(job, std::memory_order_release);
  }
  work_cv_.notify_all();
  run_chunks(&fn, n, chunk_);
  // Every chunk is taken: close the job. A worker counted in busy_workers_ before this store saw
  // it open and is waited for; one counted after it sees it closed and reads nothing of it.
  job_open_.store(0, std::memory_order_seq_cst);
  std::exception_ptr err;
  auto done = [&] { return busy_workers_.load(std::memory_order_seq_cst) == 0; };
  spin_until(done, spin_after(start));
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
    err = error_;
  }
  last_job_ns_.store(int64_t((std::chrono::steady_clock::now() - start).count()),
                     std::memory_order_relaxed);
  if (err) std::rethrow_exception(err);
}

void ThreadPool::run_parts_raw(int parts, PartFn fn, const void* payload, size_t size) {
  if (parts <= 0) return;
  std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
  if (!job.owns_lock()) {
    busy_fallbacks_.fetch_add(1);
    g_busy_fallbacks.fetch_add(1);
    for (int part = 0; part < parts; ++part) fn(payload, part);
    return;
  }
  // Parts past the pool's workers (a pool resized after the caller planned) run on the caller.
  const int posted = std::min(parts, num_threads_);
  if (part_fn_ != fn) part_fn_ = fn;
  const uint64_t seq = ++part_seq_;
  parts_posted_ += posted - 1;
  // Plain release stores, so that the caller goes on to its own part while the lines travel.
  // Sleeping workers are woken after that part (a worker that sleeps has a wake-up of some 20 us
  // ahead of it anyway).
  for (int i = 1; i < posted; ++i) {
    PartPost& post = posts_[size_t(i)];
    std::memcpy(post.payload, payload, size);
    post.seq.store(seq, std::memory_order_release);
  }
  const auto start = std::chrono::steady_clock::now();
  fn(payload, 0);
  for (int part = posted; part < parts; ++part) fn(payload, part);
  const bool woke = wake_sleeping_workers(posted);
  auto answered = [&] {
    for (int i = 1; i < posted; ++i)
      if (answers_[size_t(i)].seq.load(std::memory_order_acquire) != seq) return false;
    return true;
  };
  for (int i = 0; i < kQuickPolls; ++i) {
    if (answered()) return;
    cpu_relax();
  }
  // A worker that keeps up has claimed its part long before this (a few hundred ns after the
  // post); one that has not, after as long again as the caller's own part and its quick polls
  // (at least kMinClaimWait), has no core to run on, or is asleep: the caller runs its part.
  const auto wait =
      std::max<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start, kMinClaimWait);
  if (!spin_until(answered, wait)) {
    for (int i = 1; i < posted; ++i) {
      if (answers_[size_t(i)].seq.load(std::memory_order_acquire) == seq || !claim_part(i, seq))
        continue;
      fn(payload, i);
      answers_[size_t(i)].seq.store(seq, std::memory_order_release);
      parts_taken_back_.fetch_add(1);
      g_parts_taken_back.fetch_add(1);
      log_part_taken_back(i, woke, wait);
    }
  }
  if (spin_until(answered, spin_after(start))) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_waiting_.exchange(1, std::memory_order_acq_rel);  // see PartSleep
  done_cv_.wait(lock, answered);
  caller_waiting_.store(0, std::memory_order_relaxed);
}

bool ThreadPool::wake_sleeping_workers(int posted) {
  bool any = false;
  for (int i = 1; i < posted; ++i)
    any = sleeps_[size_t(i)].sleeping.fetch_add(0, std::memory_order_acq_rel) != 0 || any;
  if (!any) return false;
  // Through mu_: a worker that stored `sleeping` holds mu_ until it waits.
  { std::lock_guard<std::mutex> lock(mu_); }
  work_cv_.notify_all();
  return true;
}

void ThreadPool::log_part_taken_back(int index, bool woke, std::chrono::nanoseconds waited) {
  const long us = long(std::chrono::duration_cast<std::chrono::microseconds>(waited).count());
  // A worker asleep (idle past its spin) takes longer to wake than the part takes; one awake that
  // is late now and then was preempted (on a VM, by the host); one late again and again has no
  // core of its own.
  const int64_t starved =
      woke ? 0 : starved_taken_back_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!logged_first_) {
    logged_first_ = true;
    KILN_LOG_AT(info) << "thread pool: worker " << index
                      << (woke ? " was asleep (or not yet started) and" : "")
                      << " had not started its part " << us << " us after the caller finished "
                      << "its own; the caller ran it (counted in parts_taken_back; logged once)";
  }
  if (!warned_starved_ && starved_warrants_warning(starved, parts_posted_)) {
    warned_starved_ = true;
    KILN_LOG_AT(warn) << "thread pool: " << starved << " of " << parts_posted_ << " parts posted "
                      << "to workers were taken back from workers that were awake but had not "
                      << "started them: more pool threads than cores this process may use? "
                      << "KILN_NUM_THREADS sizes the pool (logged once)";
  }
}

bool ThreadPool::starved_warrants_warning(int64_t starved, int64_t posted) {
  return starved >= kStarvedWarnAfter && starved * kStarvedWarnShare >= posted;
}

bool ThreadPool::claim_part(int index, uint64_t seq) {
  std::atomic<uint64_t>& claimed = claims_[size_t(index)].seq;
  uint64_t last = claimed.load(std::memory_order_relaxed);
  return last < seq && claimed.compare_exchange_strong(last, seq, std::memory_order_acq_rel);
}

void ThreadPool::run_posted_part(int index, uint64_t seq) {
  part_fn_(posts_[size_t(index)].payload, index);
  answers_[size_t(index)].seq.store(seq, std::memory_order_release);
  if (caller_waiting_.fetch_add(0, std::memory_order_acq_rel) != 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    done_cv_.notify_all();
  }
}

}  // namespace kiln
