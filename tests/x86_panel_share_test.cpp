// PanelShare (codegen/x86/panel_share.h): the packed path's tasks hand panels to threads whose own
// tasks are done. Every panel runs exactly once, with the block it was published with, and the
// owner returns from a block only when the panels its helpers claimed are done.
#include "codegen/x86/panel_share.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using kiln::x86::help_open_shares;
using kiln::x86::PanelShare;

namespace {

struct TestBlock {
  int id = -1;
  int64_t panels = 0;
};

using Share = PanelShare<TestBlock>;

}  // namespace

TEST_CASE("panel share: an owner alone runs every panel once, in order", "[x86][panel_share]") {
  Share share;
  share.open();
  for (int64_t first : {0, 1, 3}) {
    std::vector<int64_t> ran;
    share.run_block(TestBlock{7, 5}, first, 5, [&](const TestBlock& b, int64_t q) {
      CHECK(b.id == 7);
      ran.push_back(q);
    });
    std::vector<int64_t> want;
    for (int64_t q = first; q < 5; ++q) want.push_back(q);
    CHECK(ran == want);
  }
  share.run_block(TestBlock{8, 2}, 2, 2, [&](const TestBlock&, int64_t) { FAIL("no panel"); });
  share.close();
  CHECK(share.help([](const TestBlock&, int64_t) { FAIL("closed"); }) == Share::Help::closed);
}

TEST_CASE("panel share: a helper takes panels and the owner waits for them", "[x86][panel_share]") {
  // Per block, the owner's first panel waits until the helper has run one, so the helper takes
  // part in every block; the helper's panels are slow, so an owner that did not wait for them
  // would see them unfinished when its run_block returns.
  constexpr int kBlocks = 200;
  constexpr int64_t kPanels = 6;
  Share share;
  std::vector<std::atomic<int>> runs(size_t(kBlocks * kPanels));
  std::atomic<int> wrong_block{0};
  std::atomic<int> helper_panels_in_block{0};
  std::atomic<bool> owner_done{false};
  share.open();
  std::thread helper([&] {
    while (!owner_done.load()) {
      share.help([&](const TestBlock& b, int64_t q) {
        if (b.panels != kPanels) wrong_block.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        runs[size_t(b.id * kPanels + q)].fetch_add(1);
        helper_panels_in_block.fetch_add(1);
      });
    }
  });
  int helped_blocks = 0, unfinished_on_return = 0;
  for (int blk = 0; blk < kBlocks; ++blk) {
    helper_panels_in_block.store(0);
    share.run_block(TestBlock{blk, kPanels}, 0, kPanels, [&](const TestBlock& b, int64_t q) {
      if (b.id != blk) wrong_block.fetch_add(1);
      if (q == 0)  // the helper claims panel 1 at the latest while this one waits
        while (helper_panels_in_block.load() == 0) std::this_thread::yield();
      runs[size_t(b.id * kPanels + q)].fetch_add(1);
    });
    helped_blocks += helper_panels_in_block.load() > 0;
    for (int64_t q = 0; q < kPanels; ++q)
      unfinished_on_return += runs[size_t(blk * kPanels + q)] != 1;
  }
  share.close();
  owner_done.store(true);
  helper.join();
  CHECK(helped_blocks == kBlocks);
  CHECK(unfinished_on_return == 0);
  CHECK(wrong_block.load() == 0);
  for (auto& r : runs) CHECK(r.load() == 1);
}

TEST_CASE("panel share: helpers leave when every share is closed or has nothing to claim",
          "[x86][panel_share]") {
  std::vector<Share> shares(3);
  auto never = [](const TestBlock&, int64_t) { FAIL("nothing to claim"); };
  help_open_shares(shares.data(), 3, never, std::chrono::seconds(10));  // all closed: returns now
  shares[1].open();
  const auto t0 = std::chrono::steady_clock::now();
  help_open_shares(shares.data(), 3, never, std::chrono::milliseconds(20));  // open, idle
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(20));
  shares[1].close();
}

TEST_CASE("panel share: several helpers and owners, every panel once", "[x86][panel_share]") {
  // Four threads each own a task of blocks of varied panel counts and then help the others.
  constexpr int kThreads = 4, kBlocks = 50;
  std::vector<Share> shares(kThreads);
  std::vector<std::atomic<int>> runs(size_t(kThreads * kBlocks * 9));
  std::atomic<int> wrong{0};
  auto index = [](const TestBlock& b, int64_t q) { return size_t(b.id * 9 + q); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto run = [&](const TestBlock& b, int64_t q) {
        if (q >= b.panels) wrong.fetch_add(1);
        runs[index(b, q)].fetch_add(1);
      };
      shares[size_t(t)].open();
      for (int blk = 0; blk < kBlocks * (t + 1) / kThreads; ++blk) {
        const TestBlock b{t * kBlocks + blk, 1 + (blk * 7 + t) % 9};
        shares[size_t(t)].run_block(b, 0, b.panels, run);
      }
      shares[size_t(t)].close();
      help_open_shares(shares.data(), kThreads, run, std::chrono::milliseconds(5));
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
  for (int t = 0; t < kThreads; ++t)
    for (int blk = 0; blk < kBlocks; ++blk)
      for (int64_t q = 0; q < 9; ++q) {
        const bool ran_block = blk < kBlocks * (t + 1) / kThreads;
        const int want = ran_block && q < 1 + (blk * 7 + t) % 9 ? 1 : 0;
        CHECK(runs[size_t((t * kBlocks + blk) * 9 + q)].load() == want);
      }
}
