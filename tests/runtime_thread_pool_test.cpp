#include "jit/thread_pool.h"

#include <catch2/catch.hpp>

#include <kiln/errors.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using kiln::ThreadPool;

TEST_CASE("parallel_for covers every index exactly once", "[thread_pool]") {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 7, 100, 1000, 12345}) {
    for (int64_t grain : {1, 3, 64, 100000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        REQUIRE(b < e);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) REQUIRE(hits[static_cast<size_t>(i)].load() == 1);
    }
  }
}

TEST_CASE(
    "parallel_for: jobs back to back with fewer chunks than workers, no chunk outlives its job",
    "[thread_pool]") {
  // Workers that come late find every chunk taken and leave; none may run a chunk of a job that
  // has returned, or of the next job with the last one's function.
  ThreadPool pool(6);
  std::atomic<bool> inside{false};
  std::atomic<int64_t> outside_calls{0};
  for (int job = 0; job < 100000; ++job) {
    const int64_t n = 2 + job % 4;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    inside.store(true);
    pool.parallel_for(n, 1, [&, n](int64_t b, int64_t e) {
      if (!inside.load()) outside_calls.fetch_add(1);
      for (int64_t i = b; i < e && i < n; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    inside.store(false);
    for (int64_t i = 0; i < n; ++i) REQUIRE(hits[static_cast<size_t>(i)].load() == 1);
  }
  REQUIRE(outside_calls.load() == 0);
}

TEST_CASE("chunks respect the grain", "[thread_pool]") {
  ThreadPool pool(3);
  std::atomic<int64_t> small{0};
  pool.parallel_for(1000, 100, [&](int64_t b, int64_t e) {
    if (e - b < 100 && e != 1000) small.fetch_add(1);
  });
  REQUIRE(small.load() == 0);
}

TEST_CASE("an exception in a chunk reaches the caller and the pool stays usable", "[thread_pool]") {
  ThreadPool pool(2);
  REQUIRE_THROWS_AS(pool.parallel_for(1000, 10,
                                      [](int64_t b, int64_t) {
                                        if (b == 0) throw std::runtime_error("boom");
                                      }),
                    std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  REQUIRE(sum.load() == 100);
}

TEST_CASE("many callers do not oversubscribe: a busy pool runs callers inline", "[thread_pool]") {
  ThreadPool pool(2);
  std::atomic<int> concurrent{0}, peak{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep)
        pool.parallel_for(64, 1, [&](int64_t, int64_t) {
          int c = concurrent.fetch_add(1) + 1;
          int p = peak.load();
          while (c > p && !peak.compare_exchange_weak(p, c)) {
          }
          std::this_thread::yield();
          concurrent.fetch_sub(1);
        });
    });
  for (auto& t : callers) t.join();
  // At most: 8 callers each running their own loop + 1 pool worker helping one of them.
  REQUIRE(peak.load() <= 9);
  REQUIRE(pool.busy_fallbacks() > 0);
}

TEST_CASE("set_num_threads resizes", "[thread_pool]") {
  ThreadPool pool(1);
  pool.set_num_threads(3);
  REQUIRE(pool.num_threads() == 3);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(10000, 10, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  REQUIRE(sum.load() == 10000);
}

namespace {

// For the scope's lifetime, at most `more` worker threads start beyond those running now.
struct WorkerLimit {
  explicit WorkerLimit(int64_t more) { ThreadPool::limit_more_workers_for_testing(more); }
  ~WorkerLimit() { ThreadPool::limit_more_workers_for_testing(-1); }
};

}  // namespace

TEST_CASE(
    "set_num_threads past what the system can start: DeviceError, and the pool keeps its size",
    "[thread_pool]") {
  // A thread that cannot start had left the pool counting it: parallel_for then waited for it.
  ThreadPool pool(2);
  {
    WorkerLimit limit(8);
    std::string message;
    try {
      pool.set_num_threads(1024);
    } catch (const kiln::DeviceError& e) {
      message = e.what();
    }
    // The pool's own worker stops first: 9 more start (threads 2 to 10), the 11th is refused.
    CHECK(message ==
          "set_num_threads: could not start thread 11 of 1024 (Resource temporarily unavailable); "
          "the pool keeps 2 threads");
    CHECK(pool.num_threads() == 2);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(10000, 10, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    CHECK(sum.load() == 10000);
  }
  {  // built that large, the pool runs with the threads that started
    WorkerLimit limit(10);
    ThreadPool big(1024);
    CHECK(big.num_threads() == 11);
    std::atomic<int64_t> total{0};
    big.parallel_for(100000, 10, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    CHECK(total.load() == 100000);
  }
  pool.set_num_threads(3);  // no limit left behind
  CHECK(pool.num_threads() == 3);
}

namespace {

// run_parts' payload: where each part records that it ran and on which thread.
struct PartsRecord {
  std::atomic<int>* runs;    // runs[part] += 1
  std::thread::id* threads;  // threads[part] = the thread that ran it
  int64_t sleep_us[2];       // parts 0 and 1 sleep this long
};

void record_part(const PartsRecord& r, int part) noexcept {
  r.runs[part].fetch_add(1);
  r.threads[part] = std::this_thread::get_id();
  if (part < 2 && r.sleep_us[part] > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(r.sleep_us[part]));
}

// Runs `parts` parts once; returns how often each ran, and in `where` on which threads.
std::vector<int> run_parts_once(ThreadPool& pool, int parts, std::vector<std::thread::id>& where,
                                int64_t sleep_us_0 = 0, int64_t sleep_us_1 = 0) {
  std::vector<std::atomic<int>> runs(size_t(std::max(parts, 1)));
  where.assign(size_t(std::max(parts, 1)), std::thread::id());
  pool.run_parts<PartsRecord, record_part>(
      parts, PartsRecord{runs.data(), where.data(), {sleep_us_0, sleep_us_1}});
  std::vector<int> out;
  for (int i = 0; i < parts; ++i) out.push_back(runs[size_t(i)].load());
  return out;
}

// A part 0 that holds its job (and so the pool) until released.
struct Gate {
  std::atomic<int>* entered;
  std::atomic<int>* release;
};

void gate_part(const Gate& g, int part) noexcept {
  if (part != 0) return;
  g.entered->store(1);
  while (g.release->load() == 0) std::this_thread::yield();
}

// Parts that spin for about `us` microseconds, counting their runs.
struct Busy {
  std::atomic<int>* runs;
  int64_t us;
};

void busy_part(const Busy& b, int part) noexcept {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(b.us);
  while (std::chrono::steady_clock::now() < end) {
  }
  b.runs[part].fetch_add(1);
}

}  // namespace

TEST_CASE("run_parts runs every part exactly once, parts past the workers on the caller",
          "[thread_pool]") {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int parts : {0, 1, 2, 3, 4, 6}) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::thread::id> where;
        const std::vector<int> runs = run_parts_once(pool, parts, where);
        INFO("threads " << threads << " parts " << parts << " rep " << rep);
        REQUIRE(runs == std::vector<int>(size_t(parts), 1));
        if (parts > 0) REQUIRE(where[0] == std::this_thread::get_id());
        for (int part = threads; part < parts; ++part)
          REQUIRE(where[size_t(part)] == std::this_thread::get_id());
      }
    }
  }
}

TEST_CASE("run_parts: workers, asleep or not, take their parts while the caller's part runs",
          "[thread_pool]") {
  ThreadPool pool(3);
  for (int rep = 0; rep < 4; ++rep) {
    // Every other time past every poll (at most 1 ms): the workers sleep on the condition variable.
    if (rep % 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::thread::id> where;
    // Part 0 (the caller's) long enough for any worker to wake and claim its part; on odd reps
    // part 1 outlasts it by far, so that the caller sleeps until its worker answers.
    const std::vector<int> runs = run_parts_once(pool, 3, where, 20000, rep % 2 ? 40000 : 0);
    REQUIRE(runs == std::vector<int>{1, 1, 1});
    REQUIRE(where[1] != std::this_thread::get_id());
    REQUIRE(where[2] != std::this_thread::get_id());
    REQUIRE(where[2] != where[1]);
  }
  REQUIRE(pool.parts_taken_back() == 0);
}

TEST_CASE("run_parts on a busy pool runs every part on the caller, counted", "[thread_pool]") {
  ThreadPool pool(2);
  std::atomic<int> entered{0}, release{0};
  std::thread holder([&] { pool.run_parts<Gate, gate_part>(2, Gate{&entered, &release}); });
  while (entered.load() == 0) std::this_thread::yield();
  const int64_t before = pool.busy_fallbacks();
  std::vector<std::thread::id> where;
  REQUIRE(run_parts_once(pool, 3, where) == std::vector<int>{1, 1, 1});
  for (const std::thread::id& t : where) REQUIRE(t == std::this_thread::get_id());
  REQUIRE(pool.busy_fallbacks() == before + 1);
  REQUIRE(ThreadPool::busy_fallbacks_total() >= 1);
  release.store(1);
  holder.join();
}

TEST_CASE("run_parts: the caller takes back the part of a worker with no core to run on",
          "[thread_pool]") {
  // A thread pinned to one CPU makes the pool there: its worker inherits the pin, so it runs only
  // when the caller is preempted. The caller, done with its own part, runs the worker's instead
  // of spinning until the scheduler switches.
  int64_t taken_back = -1;
  const int64_t total_before = ThreadPool::parts_taken_back_total();
  std::vector<int> runs_seen;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    ThreadPool pool(2);
    std::vector<std::atomic<int>> runs(2);
    for (int job = 0; job < 200; ++job) pool.run_parts<Busy, busy_part>(2, Busy{runs.data(), 20});
    taken_back = pool.parts_taken_back();
    runs_seen = {runs[0].load(), runs[1].load()};
  });
  pinned.join();
  REQUIRE(taken_back >= 0);  // the pin took
  CHECK(runs_seen == std::vector<int>{200, 200});
  CHECK(taken_back > 0);
  // Counted process-wide too (x86::stats().pool_parts_taken_back).
  CHECK(ThreadPool::parts_taken_back_total() - total_before >= taken_back);
}

TEST_CASE("run_parts: parts taken back before a new worker first runs do not count as starved",
          "[thread_pool]") {
  // A thread pinned to one CPU at a real-time priority makes the pool: its worker inherits both,
  // so it cannot run until the caller blocks, and the caller takes back the part of its first job
  // from a worker that has not started: late as one asleep (it had counted as starved, and a new
  // pool's first parts set off the starved warning). Pinned alone, the new worker often ran
  // first.
  int64_t taken_back = -1, awake = -1;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_param fifo{};
    fifo.sched_priority = 1;
    if (sched_setaffinity(0, sizeof one, &one) != 0 ||
        pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) != 0)
      return;
    ThreadPool pool(2);
    std::vector<std::atomic<int>> runs(2);
    pool.run_parts<Busy, busy_part>(2, Busy{runs.data(), 0});
    taken_back = pool.parts_taken_back();
    awake = pool.parts_taken_back_awake();
  });
  pinned.join();
  if (taken_back < 0) {
    WARN("skipped: no real-time priority for this process (CAP_SYS_NICE)");
    return;
  }
  CHECK(taken_back == 1);
  CHECK(awake == 0);
}

TEST_CASE(
    "run_parts warns of starved workers when they miss a share of their parts, not now and "
    "then",
    "[thread_pool]") {
  // Preempted by the host now and then: no warning however long the process runs.
  CHECK_FALSE(ThreadPool::starved_warrants_warning(100, 1'000'000));
  CHECK_FALSE(ThreadPool::starved_warrants_warning(5'000, 1'000'000));
  CHECK_FALSE(ThreadPool::starved_warrants_warning(100, 10'001));
  // A share of 1% and more, from the 100th on: a pool with more threads than cores.
  CHECK(ThreadPool::starved_warrants_warning(100, 10'000));
  CHECK(ThreadPool::starved_warrants_warning(10'000, 1'000'000));
  CHECK(ThreadPool::starved_warrants_warning(150, 200));
  // Too few to tell, whatever the share.
  CHECK_FALSE(ThreadPool::starved_warrants_warning(99, 99));
  CHECK_FALSE(ThreadPool::starved_warrants_warning(0, 0));
}

TEST_CASE("run_parts and parallel_for from many callers: every part and index exactly once",
          "[thread_pool]") {
  ThreadPool pool(2);
  std::atomic<int64_t> parallel_sum{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t)
    callers.emplace_back([&, t] {
      for (int rep = 0; rep < 300; ++rep) {
        if ((t + rep) % 3 == 0) {
          pool.parallel_for(64, 1, [&](int64_t b, int64_t e) { parallel_sum.fetch_add(e - b); });
        } else {
          std::vector<std::thread::id> where;
          const int parts = 2 + rep % 2;
          if (run_parts_once(pool, parts, where) != std::vector<int>(size_t(parts), 1))
            bad.fetch_add(1);
        }
      }
    });
  for (auto& c : callers) c.join();
  REQUIRE(bad.load() == 0);
  REQUIRE(parallel_sum.load() == 64 * 6 * 100);
}

TEST_CASE("run_parts after set_num_threads", "[thread_pool]") {
  ThreadPool pool(2);
  std::vector<std::thread::id> where;
  REQUIRE(run_parts_once(pool, 2, where) == std::vector<int>{1, 1});
  pool.set_num_threads(4);
  REQUIRE(run_parts_once(pool, 4, where, 20000) == std::vector<int>{1, 1, 1, 1});
  REQUIRE(where[3] != std::this_thread::get_id());
  pool.set_num_threads(1);
  REQUIRE(run_parts_once(pool, 3, where) == std::vector<int>{1, 1, 1});
  REQUIRE(where[2] == std::this_thread::get_id());
}
