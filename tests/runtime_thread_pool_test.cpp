#include "jit/thread_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
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

// run_parts' payload: where each part records that it ran and on which thread.
struct PartsRecord {
  std::atomic<int>* runs;    // runs[part] += 1
  std::thread::id* threads;  // threads[part] = the thread that ran it
  int64_t sleep_us_part;     // the part that sleeps, -1 for none
  int64_t sleep_us;          // how long
};

void record_part(const PartsRecord& r, int part) noexcept {
  r.runs[part].fetch_add(1);
  r.threads[part] = std::this_thread::get_id();
  if (part == r.sleep_us_part) std::this_thread::sleep_for(std::chrono::microseconds(r.sleep_us));
}

// Runs `parts` parts once; returns how often each ran and on which threads.
std::vector<int> run_parts_once(ThreadPool& pool, int parts, std::vector<std::thread::id>& where,
                                int64_t sleep_part = -1, int64_t sleep_us = 0) {
  std::vector<std::atomic<int>> runs(size_t(std::max(parts, 1)));
  where.assign(size_t(std::max(parts, 1)), std::thread::id());
  pool.run_parts<PartsRecord, record_part>(
      parts, PartsRecord{runs.data(), where.data(), sleep_part, sleep_us});
  std::vector<int> out;
  for (int i = 0; i < parts; ++i) out.push_back(runs[size_t(i)].load());
  return out;
}

}  // namespace

TEST_CASE("run_parts runs every part once, part 0 on the caller, the others on workers",
          "[thread_pool]") {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int parts : {0, 1, 2, 3, 4, 6}) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::thread::id> where;
        const std::vector<int> runs = run_parts_once(pool, parts, where);
        INFO("threads " << threads << " parts " << parts << " rep " << rep);
        REQUIRE(runs == std::vector<int>(size_t(parts), 1));
        for (int part = 0; part < parts; ++part) {
          // Parts past the workers run on the caller, as part 0 does.
          const bool on_caller = part == 0 || part >= threads;
          REQUIRE((where[size_t(part)] == std::this_thread::get_id()) == on_caller);
        }
      }
    }
  }
}

TEST_CASE("run_parts wakes sleeping workers and waits for a slow one", "[thread_pool]") {
  ThreadPool pool(3);
  for (int rep = 0; rep < 6; ++rep) {
    // Past every poll (at most 1 ms): the workers sleep on the condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::thread::id> where;
    // A worker's part that outlasts the caller's poll (at least 50 us): the caller sleeps too.
    const std::vector<int> runs = run_parts_once(pool, 3, where, rep % 3, 3000);
    REQUIRE(runs == std::vector<int>{1, 1, 1});
    REQUIRE(where[1] != std::this_thread::get_id());
    REQUIRE(where[2] != where[1]);
  }
}

TEST_CASE("run_parts and parallel_for from many callers: nothing lost, a busy pool runs inline",
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
          if (run_parts_once(pool, 2 + rep % 2, where) != std::vector<int>(size_t(2 + rep % 2), 1))
            bad.fetch_add(1);
        }
      }
    });
  for (auto& c : callers) c.join();
  REQUIRE(bad.load() == 0);
  REQUIRE(parallel_sum.load() == 64 * 6 * 100);
  REQUIRE(pool.busy_fallbacks() > 0);
}

TEST_CASE("run_parts after set_num_threads", "[thread_pool]") {
  ThreadPool pool(2);
  std::vector<std::thread::id> where;
  REQUIRE(run_parts_once(pool, 2, where) == std::vector<int>{1, 1});
  pool.set_num_threads(4);
  REQUIRE(run_parts_once(pool, 4, where) == std::vector<int>{1, 1, 1, 1});
  REQUIRE(where[3] != std::this_thread::get_id());
  pool.set_num_threads(1);
  REQUIRE(run_parts_once(pool, 3, where) == std::vector<int>{1, 1, 1});
  REQUIRE(where[2] == std::this_thread::get_id());
}
