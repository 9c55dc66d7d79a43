// Work sharing between the packed path's tasks, panel by panel.
//
// The packed path gives each thread one task (a block of C) and packs privately, so a call ends
// when its slowest task does. On a shared machine two cores seldom run at the same speed for the
// length of a call: on an Emerald Rapids VM at 128x4096x1024 (2 threads, 5-6 ms a call) the two
// tasks' times differed by 370-750 us on average (7-12%), the faster thread idle meanwhile.
// Here an owner makes the column panels of each block it computes claimable one at a time
// (after packing A and B for it); a thread whose own tasks are done claims panels of a block in
// progress and runs them with the owner's packed A and B, which stay put until every claimed
// panel is done. Panels are small units (tens of microseconds) that need no packing of their own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kiln::x86 {

template <class Block>
class alignas(64) PanelShare {
 public:
  enum class Help { closed, idle, ran };

  // The owner's task starts / ends. A closed share is never claimed from.
  void open() { open_.store(true, std::memory_order_release); }
  void close() {
    claim_.store(0, std::memory_order_release);
    open_.store(false, std::memory_order_release);
  }

  // Owner: runs panels [first, count) of `block` (panels before `first` already ran), sharing
  // them with helpers, and returns when all of them are done. run(block, panel).
  template <class Run>
  void run_block(const Block& block, int64_t first, int64_t count, Run&& run) {
    if (first >= count) return;
    block_ = block;
    done_.store(first, std::memory_order_relaxed);
    claim_.store(uint64_t(count) << 32 | uint64_t(first), std::memory_order_release);
    for (;;) {
      const uint64_t c = claim_.fetch_add(1, std::memory_order_acq_rel);
      const int64_t q = int64_t(c & kLow);
      if (q >= count) break;
      run(block_, q);
      done_.fetch_add(1, std::memory_order_release);
    }
    // Helpers finish the panels they claimed before the buffers they read are reused.
    while (done_.load(std::memory_order_acquire) < count) pause();
  }

  // Helper: runs one claimable panel, if there is one. run(block, panel).
  template <class Run>
  Help help(Run&& run) {
    if (!open_.load(std::memory_order_acquire)) return Help::closed;
    const uint64_t seen = claim_.load(std::memory_order_relaxed);
    if (int64_t(seen & kLow) >= int64_t(seen >> 32)) return Help::idle;
    const uint64_t c = claim_.fetch_add(1, std::memory_order_acq_rel);
    const int64_t q = int64_t(c & kLow), count = int64_t(c >> 32);
    if (q >= count) return Help::idle;
    // The owner waits for this panel, so block_ is the one `c` was published with.
    run(block_, q);
    done_.fetch_add(1, std::memory_order_release);
    return Help::ran;
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

 private:
  static constexpr uint64_t kLow = 0xffffffffu;
  std::atomic<bool> open_{false};
  std::atomic<uint64_t> claim_{0};  // panel count << 32 | next panel
  std::atomic<int64_t> done_{0};    // panels of the block finished
  Block block_{};
};

// A thread whose tasks are done: runs claimable panels of the open shares until none is open, or
// until none has had a panel to claim for `patience` (an owner packing its next block, or
// descheduled; leaving is always safe, owners run every panel nobody claimed).
template <class Block, class Run>
void help_open_shares(PanelShare<Block>* shares, int64_t n, Run&& run,
                      std::chrono::nanoseconds patience) {
  auto idle_since = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    bool any_open = false, ran = false;
    for (int64_t i = 0; i < n; ++i) {
      const auto h = shares[i].help(run);
      any_open |= h != PanelShare<Block>::Help::closed;
      ran |= h == PanelShare<Block>::Help::ran;
    }
    if (!any_open) return;
    if (ran) {
      idle_since = std::chrono::steady_clock::now();
      spins = 0;
      continue;
    }
    PanelShare<Block>::pause();
    if (spins % 64 == 63 && std::chrono::steady_clock::now() - idle_since > patience) return;
  }
}

}  // namespace kiln::x86
