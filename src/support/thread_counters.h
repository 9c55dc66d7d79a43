// Event counters bumped on hot paths by any thread and read rarely (stats()). Each of the first
// kSlots threads that counts owns a cache line of its own and adds to it with a plain load and
// store (one writer, so nothing is lost, and no locked instruction: a `lock add` per call was
// ~13 ns of a 70 ns 16^3 GEMM call); later threads share one slot with atomic adds. A read sums
// the slots (relaxed: each count is exact once the threads that counted are done).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kiln {

namespace detail {
inline std::atomic<int> next_counter_ordinal{0};
}  // namespace detail

// The calling thread's ordinal among threads that have counted anything, from 0.
inline int thread_counter_ordinal() {
  // initial-exec: a direct %fs-relative access instead of a __tls_get_addr call per count.
  static thread_local int ordinal __attribute__((tls_model("initial-exec"))) = -1;
  if (ordinal < 0) ordinal = detail::next_counter_ordinal.fetch_add(1, std::memory_order_relaxed);
  return ordinal;
}

// kSlots: threads with a slot of their own (each slot a cache line).
template <size_t kFields, int kSlots = 64>
class ThreadCounters {
 public:
  void add(size_t field, int64_t n = 1) {
    const int t = thread_counter_ordinal();
    if (t < kSlots) {
      std::atomic<int64_t>& v = slots_[size_t(t)].v[field];
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      shared_.v[field].fetch_add(n, std::memory_order_relaxed);
    }
  }
  int64_t sum(size_t field) const {
    int64_t s = shared_.v[field].load(std::memory_order_relaxed);
    for (const Slot& slot : slots_) s += slot.v[field].load(std::memory_order_relaxed);
    return s;
  }

 private:
  struct alignas(64) Slot {
    std::array<std::atomic<int64_t>, kFields> v{};
  };
  std::array<Slot, kSlots> slots_{};
  Slot shared_{};
};

}  // namespace kiln
