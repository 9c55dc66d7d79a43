// The packed path's BLIS blocking (see blocking.h).
#include "codegen/x86/blocking.h"

#include <algorithm>

namespace kiln::x86 {

int64_t packed_mr(Isa isa) { return isa == Isa::avx512 ? 14 : 6; }
int64_t packed_nr(Isa isa) { return isa == Isa::avx512 ? 32 : 16; }

// KC on cores that split 256-bit ops (CacheSizes::split_256): at most 288, so that a K block's
// 16-column B panel (18 KiB) and a 6-row A panel leave room in Zen 1's 32 KiB L1. AMD EPYC Zen 1,
// 2 vCPUs, paired plans on 2 threads against KC 512, two runs: 512^3 1.18-1.21x, 768^3 1.22x,
// 64x4096x1024 1.35x, 274x177x2838 1.46x, 1024x64x1024 2.60-2.76x, x.T @ w 4096x64x4096 2.41x,
// 2048^3 1.04-1.05x, 1000^3 0.99-1.06x; 128x4096x1024, 198x1456x525 (K blocks of 264 either
// way), 255^3, 300^3, 35x1811x2726 1.00x; x.T @ w 512x32x512 0.97x. A cap of 256 read 2048^3
// 1.05x, 274x177x2838 2.26x, but 198x1456x525 0.77x (three K blocks of 176 instead of two).
constexpr int64_t kSplit256MaxKc = 288;
// zen_prepacked (see packed_blocking): with B packed once, KC up to 1024 in one MC block where
// the task's A block at that KC is within kZenPrepackedABlockL2s L2s.
constexpr int64_t kZenPrepackedMaxKc = 1024;
constexpr int64_t kZenPrepackedABlockL2s = 4;

const char* kc_rule_name(KcRule r) {
  switch (r) {
    case KcRule::standard:
      return "standard";
    case KcRule::long_k:
      return "long_k";
    case KcRule::short_k_1024:
      return "short_k_1024";
    case KcRule::one_block:
      return "one_block";
    case KcRule::few_rows:
      return "few_rows";
    case KcRule::zen_prepacked:
      return "zen_prepacked";
  }
  return "?";
}

namespace {

// few_rows (see packed_blocking): up to kFewRows rows a task, B's block spans kFewRowsBlockCols
// columns; up to kSomeRows, kSomeRowsBlockCols.
constexpr int64_t kFewRows = 24;
constexpr int64_t kFewRowsBlockCols = 512;
constexpr int64_t kSomeRows = 60;
constexpr int64_t kSomeRowsBlockCols = 256;
// rows_outer up to this K (one K block): with a short K each kernel call is short and C's tiles,
// each written once, are most of the traffic; walked panel by panel down the rows each tile row
// is a new run of C, walked row tile by row tile C is written along its rows (which the hardware
// prefetchers follow) while B's block is re-read from L2. Intel Xeon, paired plans, 2 threads,
// against panel -> row tile (with the next tile's C prefetched, packed_kernel.cpp): 8000x2000x16
// 2.41x, 4000x4000x32 1.66x, 2000x2000x32 1.20x, 2000x2000x64 1.13x, 64x4096x64 1.07x,
// 1000x4000x48 1.13x, 2000x2000x128 1.07-1.09x, 4000x4000x128 1.09x, 3000x1000x96 1.02x,
// 1000x1000x64 1.01x, 1000x1000x128 1.02x, 128x2000x64 0.98x (one thread 4000x4000x32 1.63x,
// 2000x2000x128 1.07x). Longer K: 2000x2000x256 1.02x, but 256^3 0.96x, 300^3 0.98x, 2048^3
// 0.99x, 512^3 1.01x.
constexpr int64_t kRowsOuterMaxK = 128;

// AVX-512 splits M over the threads from kSplitMMinTiles row tiles a thread where M is at least
// N / kSplitMMinRowsPerCol: its A was packed by 14-lane gathers, dearer per element than B's row
// copies, and split over N each thread packs all of A. Measured with those gathers (before A was
// packed in the kernels, gemm_driver.cpp's blk.a_rs); measured again with A packed in the kernels
// (paired, passive OpenMP, time of the split over M against over N): 300x200x500 0.86-0.91x,
// 200x200x1000 0.91-0.92x, 400x300x500 0.93-0.94x, 350x350x350 0.93-0.95x, 128x256x1024
// 0.94-0.96x, 420x300x300 0.96-0.99x, 300x300x2048 0.98x, 200x400x400 0.99-1.00x, and at the
// rule's edge (M = N / 2) 150x300x500 1.06-1.11x: the rule stands. With the gathers: Intel Xeon,
// paired plans (two runs where
// two figures), 2 threads, against the split over N: 256^3 1.17-1.19x, 300x200x500 1.12-1.17x,
// 420x300x300 1.08-1.11x, 128x256x256 1.04-1.11x, 128x256x1024 1.07-1.09x, 126x200x500 1.07x,
// 120x240x600 1.06x, 300x300x2048 1.07x, 384^3 1.04-1.07x, 384x768x512 1.02x,
// 384x512x128 1.01-1.02x, 256x512x512 1.01x, 200x400x400 1.01-1.05x, 440^3 1.01x, 300^3 0.97-1.07x,
// 300x600x300 0.96x, 400x800x1024 0.98x. At a third or less of N: 128x384x384 0.95x, 100x300x300
// 0.95x, 256x1024x256 0.96x, 128x512x512 0.92x, 200x2048x512 0.94x. AVX2 (6-row panels by register
// transposes): 0.96-1.02x (160x320x512, 180x256x800, 128x256x1024), not taken.
constexpr int64_t kSplitMMinRowsPerCol = 2;
constexpr int64_t kSplitMMinTiles = 4;
// ... but split N where each thread gets kSplitNMinPanels column panels or more and A is no
// bigger than B (M <= N): since the kernels over a block's first panel pack A as they read it
// (gemm_driver.cpp, blk.a_rs) each thread's copy of A costs less than its copy of all of B, and
// N's panels split evenly where 512^3's 37 row tiles do not. Intel Xeon, paired plans against the
// split over M (both packing A in the kernels), 2 threads, OMP_WAIT_POLICY=passive: 512^3
// 1.01-1.02x, 768^3 1.01-1.02x, 2048^3 1.02x, 256x512x512 1.03x, 1024^3 0.99-1.01x, 600x1024x512
// 1.00x, 448x2048x512 1.00x. Where the rule stops, in runs that favoured the split over N (oneDNN's
// spinning threads ran before the other plan more often): 8-10 panels (256^3 0.94-1.01x,
// 300x300x2048 0.96-0.98x) and A bigger than B (2000x256x1000 0.96-0.98x).
constexpr int64_t kSplitNMinPanels = 8;
// ... and split M, not N, where the threads' columns would be short rows of work (a thread's
// columns times K up to kSplitNMaxRowWork) and each thread gets a row tile: split over N, every
// row of C has a line that both threads write where C sits off a line (as malloc and NumPy give
// it), and at these sizes that line's trips between the cores cost more than the row's
// arithmetic. Such problems reach the packed path when their dims are symbolic (the direct paths
// take them when exact). Paired plans, 2 threads, Emerald Rapids, all dims symbolic, against the
// split over N, C 16 bytes off a line: 48^3 2.22x, 64^3 2.25x, 80^3 1.75x, 96^3 1.47x, 64x128x64
// 1.79x, 16x64x64 1.65x, 20x100x50 1.28x, 40x40x200 0.93x; on 64-byte lines 0.85-1.37x (64^3
// 0.92x, 64x128x64 0.85x, 16x64x64 0.89x, 80^3 1.37x). Past the bound the split over N keeps
// its edge (48x128x256 or 28x100x300 split over M: 0.56x and 0.42x, B packed by both threads).
constexpr int64_t kSplitNMaxRowWork = 8192;

// K split (PackedBlocking::tk). Split over N, every task packs all of A, over all of K (split
// over M, all of B); split over K, each packs its K blocks of A and of B. Fewer elements are
// packed per FMA when M or N is small, and the load is even where a split over a few column
// panels is not (3 panels over 2 threads: 2 and 1). Its price: partial sums of all of C, added
// in a second pass over the pool. The split is taken when a cost model (the busiest task's
// FMAs, kPackCost FMA-times per element it packs, the second pass) puts the present split at
// kKSplitGain times its cost or more. Measured on the Zen 3 (2 threads, K split against the
// split over N or M, paired, plans side by side; M and N in 16..256 and a few larger, K
// 1024..8192; 133 measurements): where the model takes it, 0.99-1.88x, median 1.13x (64x48x4096
// 1.40x, 32x32x8192 1.16-1.22x, 64x64x4096 1.06-1.13x, 96x96x4096 1.15x, 16x16x8192 1.88x: its
// one panel had left a thread idle); where it does not, 0.95-1.17x (128x256x1024 0.96x,
// 1024x256x1024 0.95x, 48x4096x1024 0.98x, 512x256x2048 0.98x; 16x64x1024 1.17x and 9 more
// over 1.05x left).
constexpr double kPackCost = 10;
constexpr double kReduceCost = 4;     // per partial element added, per thread
constexpr double kSecondPass = 64e3;  // the second pass's dispatch
constexpr double kKSplitGain = 1.03;
constexpr int64_t kKSplitMinK = 512;  // K per task

// The modeled time of the busiest task of `b`, in FMA-times (see kPackCost).
double task_cost(const PackedBlocking& b, int64_t M, int64_t N, int64_t K) {
  const double rows = double(ceil_div(b.mtiles, b.tm) * b.MR),
               cols = double(ceil_div(b.npanels, b.tn) * b.NR);
  const double k = double(std::min(K, b.npc / b.tk * b.KC));
  double cost = rows * cols * k + kPackCost * k * (rows + cols);
  if (b.tk > 1) cost += kReduceCost * double(M * N) * double(b.tk - 1) / double(b.tk) + kSecondPass;
  return cost;
}

}  // namespace

int64_t k_split_tasks(int64_t M, int64_t N, int threads, const CacheSizes& caches) {
  const int64_t c_bytes = std::max<int64_t>(1, M * N * 4);
  return std::clamp<int64_t>(1 + caches.l2_bytes / c_bytes, 1, std::max(1, threads));
}

// The one-thread blocking with its K blocks split evenly over min(k_split_tasks, K /
// kKSplitMinK) tasks (tk = 1: K too short, or C too big, to split).
PackedBlocking k_split_blocking(int64_t M, int64_t N, int64_t K, Isa isa, int threads,
                                const CacheSizes& caches, bool b_transposed) {
  PackedBlocking b = packed_blocking(M, N, K, isa, 1, false, caches, b_transposed);
  const int64_t tk = std::min(k_split_tasks(M, N, threads, caches), K / kKSplitMinK);
  if (tk < 2) return b;
  // A multiple of tk blocks (K 1024 at KC 344 is three; split 1 + 2 the tasks ran 0.80-0.93x),
  // KC a multiple of 4 that leaves no block empty (65536 over 207 blocks of 320 is 205 blocks;
  // over 216 of 304, 216).
  for (int64_t npc = round_up(b.npc, tk); npc <= round_up(b.npc, tk) + 8 * tk; npc += tk) {
    const int64_t KC = round_up(ceil_div(K, npc), 4);
    if (ceil_div(K, KC) != npc) continue;
    b.npc = npc;
    b.KC = KC;
    b.tk = tk;
    return b;
  }
  return b;
}

PackedBlocking packed_blocking(int64_t M, int64_t N, int64_t K, Isa isa, int threads,
                               bool prepacked_b, const CacheSizes& caches, bool b_transposed) {
  PackedBlocking b;
  const int64_t T = std::max(1, threads);
  b.MR = packed_mr(isa);
  b.NR = packed_nr(isa);
  b.mtiles = ceil_div(M, b.MR);
  b.npanels = ceil_div(N, b.NR);
  // Threads split M when every thread gets at least 16 row tiles (B, cheap to pack, is then
  // packed by each thread for itself), else N (A is then packed by each thread); on AVX-512 also
  // from kSplitMMinTiles row tiles a thread where M is at least half of N (kSplitMMinRowsPerCol),
  // but N from kSplitNMinPanels panels a thread where M <= N. (With A packed by gathers, N
  // instead of M where M's tiles split unevenly was 0.98-0.99x at 512^3, 0.99x at 1024^3, 1.01x
  // at 768^3, 1.03x at 2048^3.)
  b.tm = std::clamp<int64_t>(b.mtiles / 16, 1, T);
  if (isa == Isa::avx512 && M * kSplitMMinRowsPerCol >= N && b.mtiles >= kSplitMMinTiles * T)
    b.tm = T;
  if (isa == Isa::avx512 && b.npanels >= kSplitNMinPanels * T && M <= N) b.tm = 1;
  if (b.tm == 1 && std::min(T, b.npanels) > 1 && b.mtiles >= T &&
      ceil_div(N, T) * K <= kSplitNMaxRowWork)
    b.tm = T;
  while (T % b.tm) --b.tm;
  b.tn = std::clamp<int64_t>(T / b.tm, 1, b.npanels);
  // KC: 512, or 1024 when each task has at least 512 rows and L2 holds a 1024 x NR panel of B in
  // an eighth of it, an eighth that holds at least 32 rows of A at that KC (long_k), or when B is
  // prepacked and all of a task's rows at KC 1024 fit in a third of L2 (short_k_1024: one MC
  // block, A packed once per K block, fewer passes over C); at most kSplit256MaxKc (288) instead
  // of 512 on cores that split 256-bit ops.
  // Panels overflow L1 and their rows stream from L2, which keeps up. Measured: 2048^3 on a Zen 5
  // (1 MiB L2) at 471 GFLOP/s with KC 1024 (437 with 512); 128x4096x1024 on a Zen 5 at 385-393
  // with 512 (356-377 with 1024: its 140 x 1024 A block is over half of that L2); on two Xeons
  // with 2 MiB L2, prepacked Linear+GELU 1-2% faster with 1024 on one, even on the other; with B
  // packed per call, 1-5% slower with 1024 (paired, 2 threads, five runs at M = 128 and 64: B
  // read from memory packs slower into a 1024-row block that shares L2 with a 1024-column A).
  // A Zen 3 (AVX2, 512 KiB L2) ran 2048^3 at 0.74-0.87x of OpenBLAS with KC 1024, whose eighth
  // of L2 holds only 12 rows (each B panel came from L3 for every two row tiles), and at 1.00x
  // with KC 512 and 60-72 rows.
  const int64_t rows_per_task = ceil_div(b.mtiles, b.tm) * b.MR;
  const bool long_k = rows_per_task >= 512 && caches.l2_bytes / (8 * b.NR * 4) >= 1024 &&
                      caches.l2_bytes / 8 / (1024 * 4) >= 32;
  const bool short_k_1024 =
      !long_k && prepacked_b && rows_per_task * 1024 * 4 <= caches.l2_bytes / 3;
  const int64_t kc_max = long_k || short_k_1024 ? 1024 : caches.split_256 ? kSplit256MaxKc : 512;
  b.npc = std::max<int64_t>(1, ceil_div(K, kc_max));
  b.KC = round_up(ceil_div(K, b.npc), 4);
  b.kc_rule = long_k ? KcRule::long_k : short_k_1024 ? KcRule::short_k_1024 : KcRule::standard;
  // MC: an MC x KC block of A in a quarter of L2 (an eighth with long_k, a third with
  // short_k_1024 or one_block; the C tile rows and B's panels pass through L2 too), split evenly
  // over the task's rows.
  int64_t a_share = long_k ? 8 : short_k_1024 ? 3 : 4;
  // one_block: when the task's rows overflow a quarter of L2 at this KC but fit a third of it at
  // a KC of at least 256, KC shrinks to fit them if need be: A is packed once per K block and B
  // panel by panel just before its use, instead of B's whole block passing through L3 once per MC
  // block. Measured on the Zen 3: 128x4096x1024 (132 rows a task) from 0.83x of OpenBLAS at KC 512
  // with three MC blocks to 0.91-0.96x at KC 208-344 with one (paired, 2 threads).
  if (!long_k && !short_k_1024 && rows_per_task * b.KC * 4 > caches.l2_bytes / 4) {
    const int64_t kc_fit = std::min(b.KC, caches.l2_bytes / 3 / (rows_per_task * 4) / 4 * 4);
    if (kc_fit >= 256) {
      b.npc = ceil_div(K, kc_fit);
      b.KC = round_up(ceil_div(K, b.npc), 4);
      a_share = 3;
      b.kc_rule = KcRule::one_block;
    }
  }
  // zen_prepacked: on cores that split 256-bit ops, with B packed once, KC up to 1024 and
  // all of a task's rows in one MC block, where that A block is within four L2s (2 MiB on the Zen
  // 1): the kernel needs 88 bytes of A and B per 12 FMA cycles, which L2 (B's 64 KiB panel) and
  // L3 (A) supply, and each C tile is loaded and stored once per 1024 of K instead of per 256-288
  // (a kernel call costs ~65 cycles besides its FMAs). Not with B packed per call: 128x4096x1024
  // 0.95x, 64x4096x1024 0.90x (its blocks then span 4 panels, whose rows pack slowly). AMD EPYC Zen
  // 1, paired plans, B prepacked, 2 threads, against the rules above: 128x4096x1024 with bias and
  // GELU 1.05x (1.03-1.08), 64x4096x1024 with bias and GELU 1.06x, 128x1024x4096 with bias and
  // GELU 1.04x, 128x4096x4096 1.04x, 128x2048x2048 with bias and GELU 1.03x, 96x4096x1024 1.03x,
  // 160x4096x1024 1.04x, 256x4096x1024 1.04x, 512x4096x1024 with bias and GELU 1.03x,
  // 128x11008x4096 1.02x, 128x4096x1100 1.02x, 60x4096x1024 1.03x, 64x1024x1024 1.03x, 300^3
  // 1.03x, 512^3 1.02x, 700x1024x1024 1.03x, 800x2048x1024 1.02x (1.6 MiB of A a task),
  // 600x4096x1024 1.01x, 1000^3 1.01x, 32x1024x1024 1.00x; one thread 128x4096x1024 with bias and
  // GELU 1.02x, 512^3 1.01x. Past the bound: 1024^3 (2 MiB) 1.01x, 2048x1024x1024 (4 MiB) 0.92x,
  // 2048^3 0.99x. (KC 512 instead: 128x4096x1024 with bias and GELU 1.03x, 16x4096x1024 0.98x
  // against short_k_1024's 1024.)
  // AVX2 on Zen cores that run 256-bit ops whole (CacheSizes::amd_zen) takes it where K is past
  // kc_max. AMD EPYC Zen 3, paired plans, B prepacked, 2 threads, against the rules above:
  // 128x4096x1024 1.04-1.08x, 256x4096x1024 1.10x, 96x4096x1024 1.06x, 160x4096x1024 1.06x,
  // 128x1024x4096 1.05x, 128x4096x4096 1.06x, 128x11008x4096 1.06x, 128x2048x2048 1.06x,
  // 256x256x1024 1.08x, 300x300x2048 1.05x, 256x1024x2048 1.04x, 400x4096x4096 1.04x,
  // 64x4096x1024 1.02x, 64x1024x1024 1.03x, 600x4096x1024 1.02x, 800x2048x1024 1.03x, 768^3
  // 1.03x, 1000^3 1.02x, 700x1024x1024 1.01x, 1000x256x1000 1.01x, 1024^3 1.00x, 2048^3 (past
  // the bound) 1.01x, 16x4096x1024 0.99x. Where K is within kc_max only one MC block changes:
  // 512^3 0.96-0.97x, 384^3 0.95x, 300^3 1.00x.
  const bool zen_prepacked = caches.split_256 || (caches.amd_zen && isa == Isa::avx2 && K > kc_max);
  if (zen_prepacked && prepacked_b && !long_k && !short_k_1024) {
    const int64_t npc = std::max<int64_t>(1, ceil_div(K, kZenPrepackedMaxKc));
    const int64_t KC = round_up(ceil_div(K, npc), 4);
    if (round_up(rows_per_task, b.MR) * KC * 4 <= kZenPrepackedABlockL2s * caches.l2_bytes) {
      b.npc = npc;
      b.KC = KC;
      b.kc_rule = KcRule::zen_prepacked;
    }
  }
  // few_rows: a task of a few rows with B packed per call is bound by the packing (each packed
  // element feeds at most that many rows), which reads B's rows in runs of the block's width
  // (packing a 1024 x 4096 B from memory on one core of the Zen 3 took 3.0-4.5 ms in blocks of
  // 512 x 128, 2.5-2.9 ms in 256 x 256, 1.7-2.0 ms in 128 x 512; a plain read of it 1.3-1.8 ms).
  // KC shrinks (never below 64) until the block of half of L2 spans 512 columns of the task (up
  // to kFewRows rows) or 256 (up to kSomeRows: more passes over C cost more there, the packing
  // weighs less). Measured on the Zen 3: 1 thread against OpenBLAS (N = 4096, K = 1024), M = 4,
  // 8, 12, 24 from 0.73-0.86x at KC 512 (128 columns, 512-byte runs) to 0.95-1.10x at KC 64-128,
  // 16x1024x1024 0.96x -> 1.00x. Paired against KC 512, 2 threads (1 thread): 32x4096x1024
  // 1.10-1.18x (1.09x), 40x4096x1024 1.11x (1.08x), 48x4096x1024 1.04-1.15x (1.08x), 56x4096x1024
  // 1.11x (1.06x), 25x4096x1024 1.09x (1.06x), 48x2048x2048 1.11x (1.13x), 50x1500x2048
  // 1.08x (1.03x), 60x3000x1000 1.09x (1.05x), 44x4096x4096 1.04-1.12x (0.93-1.08x), 27x16384x512
  // 0.97x (1.05x); with 512 columns at 32-56 rows 0.95-1.08x; at 64-96 rows with 256 columns
  // 0.96-1.00x. On 1 MiB of L2 the rule shrinks KC to 256 up to kFewRows rows and keeps 512 above;
  // on 2 MiB it keeps 512. A transposed B (x @ w.T) is packed from runs along K, KC long: the
  // rule does not apply (Zen 3, 2 threads, against OpenBLAS with the same layouts, the rule on
  // and off: 16x4096x4096 0.75x -> 0.94x, 24x4096x1024 1.02x -> 1.58x, 48x4096x1024 0.57x ->
  // 0.98x, 32x4096x4096 0.91x -> 1.00x, 16x1024x1024 0.93x -> 0.95x).
  const int64_t panels_task = ceil_div(b.npanels, b.tn);
  if (!prepacked_b && !b_transposed && b.kc_rule == KcRule::standard &&
      rows_per_task <= kSomeRows) {
    const int64_t cols = std::min(
        panels_task * b.NR, rows_per_task <= kFewRows ? kFewRowsBlockCols : kSomeRowsBlockCols);
    const int64_t kc_few = std::max<int64_t>(64, caches.l2_bytes / 2 / (cols * 4) / 4 * 4);
    if (kc_few < b.KC) {
      b.npc = ceil_div(K, kc_few);
      b.KC = round_up(ceil_div(K, b.npc), 4);
      b.kc_rule = KcRule::few_rows;
    }
  }
  const int64_t mc_cache =
      std::max(b.MR, (caches.l2_bytes / a_share) / std::max<int64_t>(1, b.KC * 4) / b.MR * b.MR);
  const int64_t mblocks =
      b.kc_rule == KcRule::zen_prepacked ? 1 : ceil_div(rows_per_task, mc_cache);
  b.MC = round_up(ceil_div(rows_per_task, mblocks), b.MR);
  // NC: with several MC blocks, the task's columns (at most 4096; the packed KC x NC block of B is
  // reused by every MC block); with one, a KC x NC block in half of L2.
  const int64_t ncp_max =
      mblocks > 1
          ? std::max<int64_t>(1, 4096 / b.NR)
          : std::max<int64_t>(1, (caches.l2_bytes / 2) / std::max<int64_t>(1, b.KC * b.NR * 4));
  b.NCP = ceil_div(panels_task, ceil_div(panels_task, ncp_max));
  b.a_once = mblocks == 1;
  b.rows_outer = b.npc == 1 && K <= kRowsOuterMaxK;
  if (T > 1 && !prepacked_b) {
    const PackedBlocking ks = k_split_blocking(M, N, K, isa, T, caches, b_transposed);
    if (ks.tk > 1 && task_cost(b, M, N, K) >= kKSplitGain * task_cost(ks, M, N, K)) return ks;
  }
  return b;
}

}  // namespace kiln::x86
