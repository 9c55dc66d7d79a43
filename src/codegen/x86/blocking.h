// The packed path's BLIS blocking, a pure function of the problem's size, the ISA, the thread
// count and the data cache sizes: the driver passes the host's caches, tests pass those of other
// machines so that every rule is exercised (and checked against the reference) on any host.
#pragma once

#include "codegen/x86/gemm.h"
#include "codegen/x86/kernel_registry.h"

#include <algorithm>
#include <cstdint>

namespace kiln::x86 {

// What the planner knows of a machine: its caches (the rules size every block from L2; the
// direct kernels' row blocks, from L1's associativity), and one trait of its cores.
struct CacheSizes {
  int64_t l2_bytes = 1024 * 1024;  // per core
  int64_t l1d_ways = 8;
  int64_t l1d_way_bytes = 4096;  // one way: addresses this far apart share an L1 set
  // The cores run a 256-bit vector op as two 128-bit halves (AMD Zen and Zen+, family 17h models
  // before 30h; Hygon's family 18h). The dot path then pays only from a longer K (dot_path.cpp),
  // and K blocks are shorter (blocking.cpp, kSplit256MaxKc).
  bool split_256 = false;
  int64_t l3_bytes = 32 << 20;  // shared by the cores
  // AMD's Zen cores, any generation (family 17h and later; Hygon's 18h; split_256 ones too). On
  // AVX2, where they run 256-bit ops whole, x @ W.T takes the dot path from a longer K than on
  // Intel's cores (dot_path.cpp), x.T @ w of a few columns the transposed path as split_256
  // cores do, and of up to 64 columns over a tall C, where they do not (transposed_path.cpp),
  // and a prepacked B longer K blocks (blocking.cpp, zen_prepacked).
  bool amd_zen = false;
  // AMD's Zen 5 (family 1Ah). Few rows against a B past the L2s pack B in the kernels of the
  // first row tile (gemm_driver.cpp, kZen5BInKernelMaxRows), as split_256 cores do everywhere;
  // AVX-512 runs x.T @ w of 17-64 columns as its transpose (transposed_path.cpp, wide_pays).
  bool amd_zen5 = false;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Which rule set KC (see packed_blocking's comments for what each was measured against).
enum class KcRule : uint8_t { standard, long_k, short_k_1024, one_block, few_rows, zen_prepacked };
const char* kc_rule_name(KcRule r);

struct PackedBlocking {
  int64_t MR = 0, NR = 0;           // microkernel tile
  int64_t mtiles = 0, npanels = 0;  // MR row tiles and NR column panels of C
  int64_t tm = 1, tn = 1;           // tasks: tm over rows x tn over columns
  int64_t KC = 0, npc = 0;          // K block and their count
  int64_t MC = 0;                   // rows of A packed at once (a multiple of MR)
  int64_t NCP = 0;                  // NR panels of B packed at once
  // One MC block per task: A is packed once per K block and reused by every column block (the
  // loops run K block -> column block), instead of once per (column block, K block).
  bool a_once = false;
  // Within a block, row tile -> column panel (C written along its rows; B's block re-read from
  // L2 by every row tile) instead of panel -> row tile: for a short K (see blocking.cpp).
  bool rows_outer = false;
  KcRule kc_rule = KcRule::standard;
  // K split: tk tasks (tm = tn = 1), each over a run of whole K blocks of all of C, tasks after
  // the first into partial buffers summed (and the epilogue applied) after them.
  int64_t tk = 1;
  // A read in place with rows a_rs apart (unit column stride) by the first column panel's kernel
  // calls over each block of A, which store its packed panels as they go; 0: A packed by
  // pack_a_block before them.
  int64_t a_rs = 0;
  // B read in place with rows b_rs apart (unit column stride) by the first row tile's kernel call
  // over each whole panel of a block, which stores the packed panel as it goes (the calls over
  // the other row tiles read it); 0: B packed by pack_b_block before them. Only panel -> row tile
  // (not rows_outer), each task over all of K (tk == 1): each panel of a block is then run once,
  // first row tile first. With several MC blocks, the first block's calls pack B's block for the
  // others.
  int64_t b_rs = 0;
};

int64_t packed_mr(Isa isa);
int64_t packed_nr(Isa isa);

// Where, in floats from the start of the next packed B panel (kc x NR), the kernel call over
// micro-panel `tile` of the current one prefetches its stretch of it: kc / kPackedUnrollK lines
// (one per unrolled K iteration), the tile-th stretch modulo the whole stretches the panel holds,
// so that every stretch lies within the panel. Unwrapped, a tall block's micro-panels prefetched
// up to hundreds of KiB past the panels, outside the buffer; on an AMD Zen 1 under KVM those
// prefetches stalled the kernels (45% of a profile's samples on the one prefetch). Paired plans,
// 2 threads, wrapped against not: 512^3 1.34x, 256^3 2.0x, x.T @ w 512x32x512 2.98x and
// 4096x64x4096 3.48x. Inline: the driver asks once per kernel call.
inline int64_t b_prefetch_stretch(int64_t kc) {
  constexpr int64_t kFloatsPerLine = 16;
  return kc / kPackedUnrollK * kFloatsPerLine;
}
inline int64_t b_prefetch_stretches(int64_t kc, int64_t NR) {
  const int64_t stretch = b_prefetch_stretch(kc);
  return stretch == 0 ? 1 : std::max<int64_t>(1, kc * NR / stretch);
}
inline int64_t b_prefetch_offset(int64_t tile, int64_t kc, int64_t NR) {
  return tile % b_prefetch_stretches(kc, NR) * b_prefetch_stretch(kc);
}

// b_prefetch_offset(tile, kc, NR) for tiles 0, 1, 2, ... in turn: one division a walk, not three
// a kernel call (64-bit divisions of 14-46 cycles each on a Zen 1, in the driver's per-call
// lambdas, which held 2.3% of a prepacked 128x4096x1024 Linear's samples; without them the plan
// ran within the noise of before, old and new processes alternating).
class BPrefetchWalk {
 public:
  BPrefetchWalk(int64_t kc, int64_t NR)
      : stretch_(b_prefetch_stretch(kc)), end_(stretch_ * b_prefetch_stretches(kc, NR)) {}
  int64_t offset() const { return offset_; }
  void next() {
    offset_ += stretch_;
    if (offset_ >= end_) offset_ = 0;
  }

 private:
  int64_t stretch_, end_, offset_ = 0;
};

// M, N >= 1; threads >= 1. Splits K over the threads (tk > 1) where the cost model in
// blocking.cpp prefers it to a split of M or N.
// b_transposed: B's rows are unit-stride along K (x @ w.T), packed from runs along K.
PackedBlocking packed_blocking(int64_t M, int64_t N, int64_t K, Isa isa, int threads,
                               bool prepacked_b, const CacheSizes& caches,
                               bool b_transposed = false);
// How many tasks a K split of an M x N C may have on `threads` threads: at most as many as
// keep the partial buffers ((tasks - 1) * M * N floats, the calling thread's) within one core's
// L2 (the split is for a small C; a large one would also sum gigabytes on many threads).
int64_t k_split_tasks(int64_t M, int64_t N, int threads, const CacheSizes& caches);
// The K split that packed_blocking weighs: the one-thread blocking, its K blocks a multiple of
// tk = min(k_split_tasks, K / 512) (tk = 1 when K is shorter or C too big).
PackedBlocking k_split_blocking(int64_t M, int64_t N, int64_t K, Isa isa, int threads,
                                const CacheSizes& caches, bool b_transposed = false);

}  // namespace kiln::x86
