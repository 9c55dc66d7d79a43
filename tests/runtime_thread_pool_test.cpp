#include "jit/thread_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
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
