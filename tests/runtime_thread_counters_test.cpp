// ThreadCounters: exact sums from many threads, including threads past the private slots (which
// share one atomic slot), read while and after they count.
#include <catch2/catch.hpp>

#include "support/thread_counters.h"

#include <thread>
#include <vector>

TEST_CASE("thread counters sum every thread's counts exactly", "[runtime][counters]") {
  // Two private slots: most of the 12 threads land in the shared one.
  static kiln::ThreadCounters<2, 2> counts;
  constexpr int kThreads = 12, kAdds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kAdds; ++i) {
        counts.add(0);
        if (i % 2 == 0) counts.add(1, t + 1);
      }
    });
  // Reads while threads count see partial sums, never more than the total.
  int64_t seen = counts.sum(0);
  CHECK(seen <= int64_t(kThreads) * kAdds);
  for (auto& th : threads) th.join();
  CHECK(counts.sum(0) == int64_t(kThreads) * kAdds);
  int64_t want = 0;
  for (int t = 0; t < kThreads; ++t) want += int64_t(kAdds / 2) * (t + 1);
  CHECK(counts.sum(1) == want);
}
