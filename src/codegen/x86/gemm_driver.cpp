// The GEMM driver: picks a path for a problem and runs it over the thread pool.
//   direct: M*N*K <= 64^3 (a GEMV the stream path can run: under 64 Ki elements of B): one fully
//   specialized unpacked kernel, single thread.
//   stream: M = 1 (GEMV): B streamed row by row into a chunk of C kept in L1, N chunks in
//   parallel, or (fewer chunks than threads) runs of K, partial rows added after them.
//   skinny: M <= 16 (AVX-512: 32) with unit-stride B columns and rows under a page apart (M <= 12
//   at any row distance, in short K blocks): direct kernels over N chunks in parallel.
//   direct_rows: B in a fifth of L2 (AVX-512: a tenth; half where C's columns fit one column tile),
//   A and B with unit column stride: direct kernels over M chunks of whole row blocks in parallel
//   (kDirectRowsBShare).
//   direct_k (k_split.cpp): a small C and a long K: direct kernels over K blocks, the
//   blocks split over the threads, partial sums added after them.
//   packed: BLIS blocking (blocking.h: KC, MC and NC from the L2 size). One task per
//           thread owns a block of C (threads split M when each gets >= 16 row tiles, else N) and
//           packs privately, with no barriers: B per KC x NC block read row by row into [kc][NR]
//           panels (or taken from a PackedB), A per MC x KC block; then the microkernel over
//           (B panel, A micro-panel) pairs, the B panel staying in L1/L2 across the A panels.
//           A thread whose tasks are done runs column panels of the blocks still in progress,
//           from their owners' packed A and B (panel_share.h).
//           With small M and N and a long K the tasks split K instead (blocking.cpp's cost
//           model; the sums as direct_k's, k_split.cpp).
// A GemmPlan resolves the path, blocking and every kernel once; run() only does pointer math.
#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/generators.h"
#include "codegen/x86/kernel_registry.h"
#include "codegen/x86/pack.h"
#include "codegen/x86/panel_share.h"
#include "jit/thread_pool.h"
#include "support/check.h"
#include "support/thread_counters.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace kiln::x86 {

namespace {

constexpr int64_t kSmallVolume = 64 * 64 * 64;
// Rows of the skinny path: against the packed path (which packs B on every call), Intel Xeon,
// paired plans, 2 threads: AVX-512 12x300x300 1.93x, 15x700x700 1.55x, 9x1000x1000 1.41x,
// 16x1000x300 1.41x, 14x512x512 1.37x, 16x512x512 1.24x, 16x1000x1000 1.20x, 16x256x256 1.07x,
// 10x1000x1000 1.05x; 24x512x512 1.38x, 32x512x512 1.21x, 24x300x300 1.17x, 32x1000x300 1.09x,
// 20x1000x1000 1.03x, 20x256x256 1.04x. KILN_ISA=avx2: 16x256x256 1.32x, 10x1000x1000 1.26x,
// 12x1000x300 1.24x, 16x512x512 1.07x; past 16 rows 20x1000x1000 1.13x, 32x1000x300 1.02x,
// 24x512x512 0.93x. (AVX2 to 8 rows before, from the Zen 3.)
constexpr int64_t kSkinnyRows = 16;        // AVX2
constexpr int64_t kSkinnyRowsAvx512 = 32;  // AVX-512
// With M symbolic (GemmProblem::dynamic_m) the skinny kernels, specialized per M, are bounded to
// this many per N and K.
constexpr int64_t kSkinnyDynamicRows = 8;
constexpr int64_t kSkinnyKBlock = 512;
// The skinny path's kernels walk B's rows down each column tile. Rows a page or more apart put
// every k-step's load in a new page, past the reach of the hardware prefetchers (and, at a power
// of two, of the same few cache sets), and the walk ran at 0.25-0.56x of the packed path, which
// reads B's rows front to back (Zen 3, one thread: M = 8, K = 1024, N = 1024: 15 against 31
// GFLOP/s; N = 4096: 4.6 against 17-20; 4x2048x2048 5.1 against 10.9; software prefetch 4-24
// rows ahead into L1 or L2 changed nothing). Below a page the walk wins when B stays in cache
// (8x1000x1000 41 against 31, 8x256x256 57 against 35, 3x100x3000 35 against 14).
constexpr int64_t kSkinnyMaxRowBytes = 4096;
// Except in K blocks of kSkinnyPageApartKBlock rows, up to kSkinnyPageApartRows rows of C: each
// pass of a kernel over a block then keeps that many pages open, read front to back tile after
// tile (within the reach of the L2 streamer's page trackers), and C's chunk, reloaded once per
// block, stays in L1/L2. The prefetch below applies as to other rows. Against the packed path
// (B packed per call), Intel Xeon, paired plans, 2 threads, B rotated over 8 copies (from
// memory), without the prefetch: 2x4096x1024 1.29x, 4x4096x1024 1.24x, 8x4096x1024 1.08x,
// 8x2048x2048 1.27x, 6x1024x4096 1.10x, 4x4096x4096 1.33x, 8x11008x4096 1.51x (one thread
// 1.24-1.54x; KILN_ISA=avx2 1.29-1.57x); B in cache 4x4096x1024 1.72x, 8x4096x1024 1.30x,
// 8x1500x1500 1.11x, 8x1024x128 1.46x, 3x1025x1000 1.80x, 7x2000x64 1.40x. The prefetch on top:
// 1.03-1.27x up to 8 rows (AVX2 1.01-1.14x); with it, 9-12 rows against packed: 10x4096x1024
// 1.27x / 1.27x in cache / from memory, 12x4096x1024 1.36x / 1.31x, 12x2048x2048 1.34x / 1.23x,
// 9x11008x4096 1.54x / 1.66x, 10x1024x1024 1.31x / 1.36x, 12x1024x4096 1.29x / 1.14x,
// 13x4096x1024 1.50x / 1.22x, 12x1024x1024 0.93x / 1.25x (AVX2 1.14-1.41x, 12x1024x1024 0.98x /
// 1.07x); 14 rows 14x1024x1024 0.81x / 1.01x, 14x4096x4096 1.03x / 0.90x; 16 rows (blocks of 16
// or 32, no prefetch) 16x1024x1024 0.76-1.09x, 16x4096x1024 0.93x. Blocks of 16 rows: 0.84-0.94x
// at 8x2048x2048; of 64: 0.74x at 8x4096x4096. Rows under a page apart keep kSkinnyKBlock:
// short blocks there ran 0.55-0.93x with B in cache.
// 13-16 rows in blocks of 64 (the rule's 32 ran about even with packed): with B in L3 1.08-1.36x
// (16x1024x1024, 16x4096x1024, 13x4096x1024, 14x1024x1024, 16x2048x2048), but with B from
// memory (ten copies rotated) 0.65-0.69x (16x4096x1024, 13x4096x1024) and 16x11008x4096 0.68x
// (Intel Xeon, paired, 2 threads): past the L2 streamer's page trackers. A copied with rows 16
// floats longer (its rows in different L1 sets) changed nothing (0.95-1.07x). Not taken.
constexpr int64_t kSkinnyPageApartRows = 12;
constexpr int64_t kSkinnyPageApartKBlock = 32;
// Where C's rows take several row blocks of the direct tiling (AVX-512: over 14 rows, in 6 x 4
// tiles; AVX2: over 6), the skinny kernels walk column tiles outer, every row block over one
// tile's rows of B before the next tile (KernelDesc::cols_outer), where row blocks outer each
// walked all of the chunk's columns (768 KiB at 384 columns x 512 rows) from L2 or L3; and where
// the thread's columns of B are out of L2 (over a quarter of it, as for the prefetch below) K
// comes in blocks of kSkinnyColsOuterKBlock (a 64-column tile of B 64 KiB). The sums and their
// order are the same. Intel Xeon, paired plans against row blocks outer in blocks of 512, 2
// threads: 16x768x3072 1.13-1.14x, 28x768x3072 1.09x, 32x768x768 1.01-1.02x, 24x512x512 1.03x,
// 28x768x512 0.99x, B in L2 (24x300x300, 32x512x512, 20x256x256, 32x1000x300, 16x333x200,
// 30x300x150) 0.99-1.01x; one thread 20x1000x1000 1.59x, 28x768x3072 1.31x, 16x768x768 1.11x,
// 28x768x512 1.08x, 32x512x512 0.98x; KILN_ISA=avx2 8x1000x1000 1.07x, 16x1000x1000 1.05x,
// 12x2048x2048 1.05x (B's rows a page apart), 10x4096x1024 1.04x, 16x768x3072 1.01x. Blocks of
// 128 instead: 1.09-1.20x where K is long but 0.93-0.95x at 28x768x512 and 32x768x768.
constexpr int64_t kSkinnyColsOuterKBlock = 256;
// The skinny kernels prefetch B kSkinnyPrefetchRows rows ahead when B's rows are at least
// kSkinnyPrefetchMinRowBytes apart (each k-step a new line, past the L1 stride prefetcher's
// reach) and each thread's columns of B are over a quarter of L2 (so they come from L3 or
// memory). Intel Xeon (2 MiB L2), paired plans, 2 threads: 8x1000x1000 1.15x (4 rows ahead) /
// 1.24x (8), 4x1000x1000 1.18x / 1.14x, 8x512x2048 1.11x / 1.09x, 8x1000x300 1.03x / 1.21x,
// 2x1000x1000 1.06x / 1.15x; KILN_ISA=avx2 (8 rows) 1.11x, 1.29x, 1.12x. With B in L2 it only
// takes load slots: 8x256x256 0.94x / 0.90x (AVX2 0.95x); direct_rows and direct_k shapes
// (200^3, 300x160x300, 64x256x1024, 128x128x4096) 1.00-1.05x, left without.
constexpr int64_t kSkinnyPrefetchRows = 8;
constexpr int64_t kSkinnyPrefetchMinRowBytes = 512;
// direct_rows: above kSmallVolume, the direct kernels (on one thread, or one chunk of M per
// thread) beat packing while B fits in this share of L2: each row block sweeps all of B from L2,
// its own A rows staying in L1. Measured on the Zen 3 (AVX2, 512 KiB L2), direct against packed,
// paired: one thread 96^3 1.15x, 100^3 1.22x, 128^3 1.10x, 120x64x256 1.08x, 300x100x100 1.15x,
// 100x100x300 1.22x, 200x200x128 1.04x (100 KiB of B), 1000x16x1000 1.54x, 2000x24x24 1.52x;
// two threads 1.01-1.23x over the same shapes. At the share's edge 256x256x100 (100 KiB) 0.98x
// on one thread, 1.08x on two; past it 256x256x128 0.98x, 150x300x200 0.98x, 256^3 0.84x,
// 100x1000x100 0.78x, 64x256x512 0.84x (one thread). The
// packed path pays for packing both operands and, at N = 100, for a 16-wide edge panel 4 columns
// full (the direct kernel's edge tile is one masked vector). A's rows must be runs (unit column
// stride): with a transposed A each k-step of a row block loads a new line, and direct against
// packed ranged from 1.5x (2000x24x24, 1000x16x1000) to 0.88x (128^3: the lines 512 bytes apart
// share a few L1 sets) and 0.93x (160x100x200, 128x64x200).
// AVX-512 (Intel Xeon, 2 MiB L2, 2 threads, paired plans): 100^3 1.56x, 128^3 1.74x, 80^3 1.71x,
// 120x64x256 2.40x, 300x64x64 2.19x, 2000x24x24 1.80x, 64x128x384 1.61x, 400x128x256 1.47x,
// 300x160x300 1.41x (188 KiB of B), 1000x64x512 1.32x, 200^3 1.12-1.16x, 128x256x192 1.11x,
// 150x220x220 1.19x, 512x100x100 1.14x; 100x200x300 (234 KiB) 1.01x, 256^3 (256 KiB) 0.84x and
// 1.18x in two runs: a tenth of L2 there. Past it, with the direct kernel's 14 x 2 tiling (the
// packed kernel's shape, A read in place), one thread: 1000x96x1000 0.96x, 1000x100x1000 1.07x,
// 1000x128x1000 1.02x, 256^3 0.97x: not taken.
constexpr int64_t kDirectRowsBShare = 5;         // AVX2: B <= L2 / 5
constexpr int64_t kDirectRowsBShareAvx512 = 10;  // AVX-512: B <= L2 / 10
// Where C's columns fit one column tile of the direct tiling (AVX-512: 64, AVX2: 16), each row
// block reads its rows of A once, and only B, from L2, is read again: B up to half of L2. Intel
// Xeon, paired plans, 2 threads, against the packed path: 4000x16x8000 2.18x, 2000x32x4000 1.68x,
// 3000x24x3000 1.72x, 1000x64x1000 1.26x, 2000x64x1000 1.13x, 1000x64x4000 1.27x, 1000x60x3000
// 1.29x, 1000x64x1024 1.12x (kiln / oneDNN 0.67-0.97x -> 1.04-1.53x); AVX2 4000x16x8000 1.59x,
// 2000x16x10000 1.49x. With more tiles each row block reads A's rows from L1 but B from L2 once
// per tile, and direct_rows ran 0.38-0.95x of packed (AVX-512: 1000x100x1000, 1000x256x1000,
// 1000x512x1000, 512x256x512, 400^3, 300^3, 512^3; AVX2 2000x32x4000 0.98x, 2000x64x2000 0.82x). A
// small C takes direct_k first (against direct_rows 500x64x1000 1.04x, 300x64x2000 1.12x).
constexpr int64_t kDirectRowsBShareOneTile = 2;
// Except from kDirectRowsWideMinRows rows of C over more than kDirectRowsWideMaxCols columns
// (C's columns over more than one tile): each row block of the direct kernels reads all of B
// from L2 again (a few rows' worth of FMAs per pass), where the packed path reads each panel
// of B from L1 for all its row tiles and pays for packing A and B once, which many rows and
// columns amortize. Packed against direct_rows, paired plans, Intel Xeon (B within a tenth of L2),
// 2 threads: 1000x160x200 1.21x, 1000x256x200 1.26-1.28x (0.84x in a noisier run), 1600x256x200
// 1.34x, 2000x160x200 1.24x, 2000x192x200 1.20x, 2000x256x200 1.30-1.46x (0.95x), 2500x160x200
// 1.24x, 3000x256x200 1.17x, 4096x200x200 1.06x, 4096x192x256 1.13x, 4096x256x150 1.20x,
// 8000x256x200 1.21x; one thread 1000x256x200 1.05x, 2000x256x200 1.11x, 2000x160x200 1.07x;
// KILN_ISA=avx2 (B within a fifth of L2) 1000x256x200 1.56x, 2000x256x200 1.38x, 1000x400x200
// 1.55x, 2000x160x200 1.10x. Not taken: 128 columns (AVX-512 4000x128x200 0.89-1.05x, 2000x128x200
// 0.86x on one thread; AVX2 4000x128x200 1.11x), 96 columns 1.02-1.04x, fewer rows (800x256x200
// 0.93x on one thread), AVX2 48 columns (2000x48x200 0.88x), C in one column tile (AVX-512
// 20000x64x200 0.81x, 50000x32x100 0.51x, 8000x48x1000 0.73x).
constexpr int64_t kDirectRowsWideMinRows = 1000;
constexpr int64_t kDirectRowsWideMaxCols = 128;
// Even chunks against whole row blocks (Intel Xeon, paired plans, 2 threads): 28x16x1024 (20 + 8
// rows -> 14 + 14) 1.18x, 50x16x2000 1.12x, 64x8x1024 1.03x; under the ratio they ran 0.96-1.04x
// (80^3, 100^3, 128^3, 200^3, 300x64x64, 400x128x256, 1000x64x512).
constexpr double kDirectRowsEvenSplit = 1.1;
constexpr size_t kMaxPlans = 4096;

// Calls by path (GemmStats; the sum of the paths' counts is the number of calls), and the packed
// calls with a PackedB: per-thread slots, one plain add per count.
enum CallCount : size_t {
  kEmpty,
  kDirect,
  kSkinny,
  kStream,
  kDot,
  kPacked,
  kPaths,
  kPrepacked = kPaths
};
constexpr size_t kCallCountFields = kPaths + 1;
constinit ThreadCounters<kCallCountFields> g_call_counts;
constexpr int64_t kFloatsPerLine = 16;

// A GEMV of at least kStreamOverDirect elements of B takes the stream path even within the small
// volume (the direct kernel walks B's rows down each 64-column tile, on one thread). Measured on
// the Zen 3, stream against direct, paired plans, 2 threads (1): B in cache 1x512x512 1.96x
// (1.09x), 1x1024x256 3.39x (2.11x), 1x2048x128 2.82x (2.02x), 1x128x1024 1.75x, 1x256x256 1.00x
// (1.17x), 1x300x200 1.11x, 1x200x300 0.93x, 1x128x512 0.84x (1.00x), 1x64x1024 1.19x (0.87x);
// B from memory (weights rotated over 256 MB) 1.76-2.57x (1.00-1.66x). Below it, 1x100x100
// 0.83x (0.67x).
constexpr int64_t kStreamOverDirect = 64 * 1024;

// Largest byte displacement a direct kernel over [rows x cols] would encode.
bool direct_disp_fits(const GemmProblem& p, int64_t rows, int64_t cols, int64_t b_rs) {
  auto mag = [](int64_t v) { return v < 0 ? -v : v; };
  const int64_t elems = rows * mag(p.a.row_stride) + (p.K + 16) * mag(p.a.col_stride) +
                        (p.K + 16) * mag(b_rs) + rows * mag(p.ldc) + rows * mag(p.epi.ld_residual) +
                        cols + 64;
  return elems < (int64_t{1} << 28);
}

}  // namespace

KernelDesc epilogue_desc(const GemmProblem& p, Isa isa) {
  KernelDesc d;
  d.isa = int64_t(isa);
  d.has_bias = p.epi.bias != nullptr;
  d.has_scale = p.epi.scale != 1.0f;
  d.act = int64_t(p.epi.act);
  d.has_residual = p.epi.residual != nullptr;
  return d;
}

// A direct kernel over rows x cols of p with K steps, B's rows b_rs apart.
KernelDesc direct_desc(const KernelDesc& base, const GemmProblem& p, int64_t rows, int64_t cols,
                       int64_t K, int64_t b_rs, int64_t rows_cap) {
  KernelDesc d = base;
  d.kind = KernelKind::direct;
  d.rows = rows;
  d.cols = cols;
  d.K = K;
  d.a_rs = p.a.row_stride;
  d.a_cs = p.a.col_stride;
  d.b_rs = b_rs;
  d.ldc = p.ldc;
  d.ld_res = d.has_residual ? p.epi.ld_residual : 0;
  // A cap that leaves the tiling as it is (M within it, or tiles already as short) changes no
  // code: no kernel of its own.
  if (rows_cap > 0 && rows_cap < rows) {
    const bool avx512 = base.isa == int64_t(Isa::avx512);
    const DirectTiling own = direct_tiling(avx512, rows, cols),
                       capped = direct_tiling(avx512, rows, cols, rows_cap);
    if (capped.rows_max != own.rows_max || capped.vectors != own.vectors) d.rows_cap = rows_cap;
  }
  return d;
}

// A block's rows each hold a line of A at a time; the cap leaves two ways of a set for B and C.
// Measured on an Intel Xeon (12 ways, paired plans, 2 threads), A's rows 4 KiB apart, against
// the tiling's own rows (28 for one vector, 14 for two): with 10 rows 1000x16x1024 1.56x,
// 1000x8x1024 1.57x, 512x8x1024 1.44x, 1000x32x1024 1.10x, 28x16x1024 1.84x, 100x16x1024 1.65x,
// 64x8x1024 2.09x, 2000x24x2048 1.11x, 300x20x2048 1.11x, 16x16x4096 (direct_k) 1.10x; 2 KiB
// apart (20 rows) 2048x8x512 1.09x, 1000x16x512 1.10x. Caps of 6, 8 and 12 rows gained less
// (1000x16x1024 1.30x, 1.32x, 1.31x). AVX2 tiles hold at most 12 rows: 10 ran 0.90-1.01x
// (64x8x1024, 1000x8x1024), not taken; nor on the skinny path (12x4096x1024 0.89x: few rows, B
// from memory). One thread, the small volume's single kernel: 20x8x1024 1.23x, 24x10x1024 1.27x,
// 18x16x1024 1.19x, 16x16x2048 1.14x, 14x16x1024 1.06x, 16x16x1024 0.93x; with no more rows than
// ways, 12x16x1024 0.91x: no cap there.
int64_t direct_rows_cap(const GemmProblem& p, Isa isa, const CacheSizes& caches) {
  constexpr int64_t kRowsChecked = 32;  // past every tiling's rows
  const int64_t bytes = (p.a.row_stride < 0 ? -p.a.row_stride : p.a.row_stride) * 4;
  // (Rows under a line apart share lines; no more rows than ways fit a set.)
  if (isa != Isa::avx512 || p.a.col_stride != 1 || p.M <= caches.l1d_ways || bytes < 64) return 0;
  const int64_t per_set = std::max<int64_t>(2, caches.l1d_ways - 2);
  const int64_t sets = std::max<int64_t>(1, caches.l1d_way_bytes / 64);
  std::array<int64_t, kRowsChecked> set_of{};  // the L1 set of each row's first line
  for (int64_t r = 0; r < kRowsChecked; ++r) {
    set_of[size_t(r)] = r * bytes / 64 % sets;
    if (std::count(set_of.begin(), set_of.begin() + r + 1, set_of[size_t(r)]) > per_set) return r;
  }
  return 0;
}

namespace {

// One block's panels in the packed path, as another thread runs them (panel_share.h): columns
// [jc, jc_end) in panels, rows [i0, i0 + mc), K block pc (k0, kc) with A's block packed at a and
// B's at b (nullptr: a PackedB), into c (rows ldc apart); acc: add to C, last: the last K block.
struct SharedPanels {
  int64_t jc = 0, jc_end = 0, pc = 0, i0 = 0, mc = 0, k0 = 0, kc = 0, ldc = 0;
  float* a = nullptr;  // written only by the owner's first panel (a_in_kernel)
  const float* b = nullptr;
  float* c = nullptr;
  int acc = 0, last = 0;
};

// How long a thread with no task left waits for a panel to claim before it leaves: longer than
// an owner takes to pack its next block of B (128x4096x1024: 1 MiB blocks, about 100 us).
constexpr std::chrono::nanoseconds kHelpPatience = std::chrono::microseconds{300};

}  // namespace

void parallel(ThreadPool* pool, int64_t n, const ThreadPool::RangeFn& fn) {
  if (pool && n > 1)
    pool->parallel_for(n, 1, fn);
  else
    fn(0, n);
}

void PackedB::FreeDeleter::operator()(float* p) const { std::free(p); }

void GemmPlan::Impl::use_packed(const KernelDesc& base, int acc, int last) {
  const int64_t m_edge = M % blk.MR, n_edge = N % blk.NR;
  for (int me = 0; me < 2; ++me) {
    if (me ? !m_edge : M < blk.MR) continue;
    for (int ne = 0; ne < 2; ++ne) {
      if (ne ? !n_edge : N < blk.NR) continue;
      KernelDesc d = base;
      d.kind = KernelKind::packed;
      d.MR = blk.MR;
      d.NR = blk.NR;
      d.rows = me ? m_edge : blk.MR;
      d.cols = ne ? n_edge : blk.NR;
      d.accumulate = acc;
      d.last = last;
      if (!last) d.has_bias = d.has_scale = d.act = d.has_residual = 0;
      kern[acc][last][me][ne] = use(d);
      d.a_rs = blk.a_rs;
      if (blk.a_rs) kern_packa[acc][last][me][ne] = use(d);
    }
  }
}

// A 16^3 GEMM takes ~50 ns; a further call, frame and path switch were ~10% of it.
[[gnu::always_inline]] inline bool GemmPlan::Impl::run_direct_fast(const GemmProblem& p) const {
  if (path != Path::direct || copy_b || p.M != M || p.N != N || p.K != K) return false;
  g_call_counts.add(kDirect);
  const KernelArgs args{p.epi.bias, p.epi.residual, p.K, 0, 0, p.epi.scale};
  direct->fn(&args, p.a.data, p.b.data, p.c);
  return true;
}

// Measured through the JIT (Zen 3, 2 threads), a constant weight packed once against read in
// place by these paths: 16^3 0.52-0.55x, 23x57x91 0.82-0.84x (direct), 100^3 0.73-0.83x
// (direct_rows), 16x16x8192 0.36-0.39x, 64x48x4096 0.76-0.79x (direct_k), 100x45x4096 0.76-0.80x
// (packed, K split), and since the stream path splits K (stream_k_tasks) 1x1024x1024 0.75x,
// 1x2048x2048 0.68x, 1x4096x1024 0.73x, 1x1024x4096 0.92x, 1x4096x4096 0.79x, 1x4096x11008
// 0.75x (stream; with B from memory, 256 MB of weights rotated: 0.81-0.96x); and against packing
// per call, kept: 4x4096x1024 2.26x, 128x4096x1024 1.10x (packed), 8x1000x1000 1.18-1.56x
// (skinny). 64^3 (direct, one thread) ran 1.08-1.12x packed once (then on both threads): not
// worth a rule of its own. x @ W.T on the dot path, packed once (then the packed path) against
// read in place, paired plans, 2 threads (1): M = 1 0.68x at 1x4096x4096 (0.71x), 0.77x at
// 1x1024x1024 (0.76x), 0.80x at 1x11008x4096; M = 2-8 1.18x at 4x4096x4096 (1.12x), 1.40x at
// 2x1024x1024, 1.91x at 8x4096x1024 (one thread, 8x1024x1024: 3.05x); narrower, packed once
// pays from kDotPackedMinCols columns: 4x16x4096 0.50x, 4x32x4096 0.85x (1.20x), 8x32x4096
// 1.27x, 4x64x4096 1.12x (1.61x), 8x64x4096 1.55x, 2x256x1024 1.22x (1.33x); one output column
// (ldc past 1, so not the a_rows dot path) 8x1x4096 0.09x. Misses left: 2x64x1024 0.84x,
// 2x4096x4096 (B from memory) 0.87x (0.86x).
// With two rows of A per pass (AVX-512, dot_pair; Intel Xeon, 2 threads), read in place against
// packed once: 2 rows win at every width (2x64x1024 1.89x, 2x256x1024 1.32x, 2x1024x1024 1.06x,
// 2x4096x4096 1.34x, 2x11008x4096 1.32x), so do 64 columns (4x64x4096 1.65x, 8x64x4096 2.31x);
// from 128 columns and 3 rows packing pays or ties: 4x128x4096 1.03x, 4x256x1024 1.11x,
// 8x128x4096 0.91x, 8x256x1024 0.89x, 3x1024x1024 0.66x, 3x4096x4096 0.94x, 4x1024x1024 0.74x,
// 4x4096x4096 0.92x, 8x1024x1024 0.57x, 8x4096x1024 0.49x, 8x4096x4096 0.65x.
constexpr int64_t kDotPackedMinCols = 64;
constexpr int64_t kDotPairsPackedMinRows = 3;
constexpr int64_t kDotPairsPackedMinCols = 128;
bool GemmPlan::prepacked_b_pays() const {
  const Impl& s = *impl_;
  const bool pairs = s.dot_pair[1] != nullptr;
  // A direct kernel over a B without unit column stride copies it row-major on every call.
  return (s.path == Path::packed && s.blk.tk == 1) || s.path == Path::skinny ||
         (s.path == Path::direct && s.copy_b) ||
         (s.path == Path::dot && s.dot_over == DotOver::b_rows && s.M > 1 &&
          s.N >= (pairs ? kDotPairsPackedMinCols : kDotPackedMinCols) &&
          (!pairs || s.M >= kDotPairsPackedMinRows));
}

GemmPlan::GemmPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmPlan::~GemmPlan() = default;
std::vector<KernelInfo> GemmPlan::kernels() const {
  std::vector<KernelInfo> infos;
  for (const Kernel* k : impl_->used) {
    infos.push_back(k->info);
    infos.back().listing = kernel_listing(*k);
  }
  return infos;
}

std::shared_ptr<const GemmPlan> GemmPlan::make(const GemmProblem& p, Isa isa, int threads,
                                               bool prepacked_b) {
  return make(p, isa, threads, prepacked_b, host_cpu().caches);
}

std::shared_ptr<const GemmPlan> GemmPlan::make(const GemmProblem& p, Isa isa, int threads,
                                               bool prepacked_b, const CacheSizes& caches) {
  KILN_CHECK(p.M >= 0 && p.N >= 0 && p.K >= 0)
      << "negative GEMM dims " << p.M << "x" << p.N << "x" << p.K;
  KILN_CHECK(isa_supported(isa)) << "this CPU cannot run " << isa_name(isa) << " kernels";
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.isa = isa;
  s.M = p.M;
  s.N = p.N;
  s.K = p.K;
  if (p.M == 0 || p.N == 0) return std::make_shared<GemmPlan>(std::move(impl));

  const KernelDesc base = epilogue_desc(p, isa);
  const bool b_unit = p.b.col_stride == 1;
  const int64_t volume = p.M * p.N * p.K;
  const bool stream = stream_can(p, prepacked_b);
  if (const DotOver over = dot_path_for(p, prepacked_b); over != DotOver::none) {
    s.plan_dot(p, over, base, threads, caches);
    return std::make_shared<GemmPlan>(std::move(impl));
  }
  if (column_as_row_fits(p)) {
    const GemmProblem t = row_problem_of_column(p);
    if (stream_can(t, prepacked_b) && (volume > kSmallVolume || t.N * t.K >= kStreamOverDirect)) {
      s.column_as_row = true;
      s.M = t.M;
      s.N = t.N;
      KernelDesc tbase = epilogue_desc(t, isa);
      tbase.bias_bcast = tbase.has_bias;
      s.plan_stream(t, tbase, std::max(1, threads));
      return std::make_shared<GemmPlan>(std::move(impl));
    }
  }
  if (!prepacked_b && volume <= kSmallVolume && !p.dynamic_m && !p.dynamic_nk &&
      !(stream && p.N * p.K >= kStreamOverDirect) &&
      direct_disp_fits(p, p.M, p.N, b_unit ? p.b.row_stride : p.N)) {
    s.path = Path::direct;
    s.copy_b = !b_unit;
    s.direct = s.use(direct_desc(base, p, p.M, p.N, p.K, b_unit ? p.b.row_stride : p.N,
                                 direct_rows_cap(p, isa, caches)));
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  const int64_t T = std::max(1, threads);
  if (stream) {
    s.plan_stream(p, base, T);
    return std::make_shared<GemmPlan>(std::move(impl));
  }
  // direct_k (k_split.cpp) where it fits, also over the skinny path's rows: skinny splits only N,
  // and a narrow C with a long K ran on one chunk there (direct_k against skinny, Intel Xeon, 2
  // threads: 4x64x8192 1.91x, 9x100x4096 1.85x, 16x128x4096 1.88x, 2x200x2048 1.67x, 8x100x4096
  // 1.13x; with two chunks of N, 8x256x2048 0.99x).
  const bool direct_k_can = !prepacked_b && b_unit && p.a.col_stride == 1 && !p.dynamic_m &&
                            !p.dynamic_nk && direct_k_fits(p.M, p.N, p.K, T, isa) &&
                            std::abs(p.b.row_stride) * 4 < kSkinnyMaxRowBytes &&
                            direct_disp_fits(p, p.M, p.N, p.b.row_stride);
  const int64_t skinny_rows = p.dynamic_m        ? kSkinnyDynamicRows
                              : isa == Isa::avx2 ? kSkinnyRows
                                                 : kSkinnyRowsAvx512;
  const bool b_rows_page_apart = std::abs(p.b.row_stride) * 4 >= kSkinnyMaxRowBytes;
  if (!prepacked_b && p.M <= skinny_rows && b_unit && !p.dynamic_nk && !direct_k_can &&
      (!b_rows_page_apart || p.M <= kSkinnyPageApartRows) &&
      direct_disp_fits(p, p.M, p.N, p.b.row_stride)) {
    s.path = Path::skinny;
    const DirectTiling tiling = direct_tiling(isa == Isa::avx512, p.M, p.N);
    const int64_t tile_w = int64_t(tiling.vectors) * (isa == Isa::avx512 ? 16 : 8);
    // Enough chunks to feed every thread, each at least a few tiles wide.
    const int64_t want = std::max<int64_t>(1, std::min<int64_t>(T, ceil_div(p.N, 4 * tile_w)));
    s.chunk = round_up(ceil_div(p.N, want), tile_w);
    s.nchunks = ceil_div(p.N, s.chunk);
    const bool b_out_of_l2 = p.K * s.chunk * 4 > caches.l2_bytes / 4;
    const bool cols_outer = tiling.rows_max < p.M;
    s.nkb = std::max<int64_t>(1, ceil_div(p.K, b_rows_page_apart           ? kSkinnyPageApartKBlock
                                               : cols_outer && b_out_of_l2 ? kSkinnyColsOuterKBlock
                                                                           : kSkinnyKBlock));
    s.kb = std::max<int64_t>(1, ceil_div(p.K, s.nkb));  // K = 0: one empty block
    s.nkb = std::max<int64_t>(1, ceil_div(p.K, s.kb));
    const int64_t last_chunk = p.N - (s.nchunks - 1) * s.chunk;
    const int64_t last_kb = p.K - (s.nkb - 1) * s.kb;
    const bool prefetch = std::abs(p.b.row_stride) * 4 >= kSkinnyPrefetchMinRowBytes && b_out_of_l2;
    for (int lc = 0; lc < 2; ++lc) {
      if (lc == 0 && s.nchunks == 1) continue;
      for (int kind = 0; kind < 4; ++kind) {  // first, middle, last, only
        if ((s.nkb == 1) != (kind == 3) || (kind == 1 && s.nkb < 3)) continue;
        KernelDesc d = direct_desc(base, p, p.M, lc ? last_chunk : s.chunk,
                                   kind >= 2 ? last_kb : s.kb, p.b.row_stride);
        d.accumulate = kind == 1 || kind == 2;
        d.last = kind >= 2;
        d.b_prefetch = prefetch ? kSkinnyPrefetchRows : 0;
        d.cols_outer = cols_outer && direct_tiling(isa == Isa::avx512, p.M, d.cols).rows_max < p.M;
        if (!d.last) d.has_bias = d.has_scale = d.act = d.has_residual = d.ld_res = 0;
        s.skinny[lc][kind] = s.use(d);
      }
    }
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  // C's columns in one column tile of the direct tiling: each row block reads A's rows once.
  const bool one_tile = p.N <= int64_t(direct_tiling(isa == Isa::avx512, p.M, p.N).vectors) *
                                   (isa == Isa::avx512 ? 16 : 8);
  const int64_t rows_b_share = one_tile && !direct_k_can ? kDirectRowsBShareOneTile
                               : isa == Isa::avx2        ? kDirectRowsBShare
                                                         : kDirectRowsBShareAvx512;
  const bool wide_and_tall =
      !one_tile && p.M >= kDirectRowsWideMinRows && p.N > kDirectRowsWideMaxCols;
  if (!prepacked_b && b_unit && p.a.col_stride == 1 && !p.dynamic_m && !p.dynamic_nk &&
      !wide_and_tall && p.N <= caches.l2_bytes / rows_b_share / 4 / std::max<int64_t>(1, p.K) &&
      std::abs(p.b.row_stride) * 4 < kSkinnyMaxRowBytes &&
      direct_disp_fits(p, p.M, p.N, p.b.row_stride)) {
    s.path = Path::direct_rows;
    // Whole row blocks of the direct kernel's tiling per chunk, one chunk per thread; even chunks
    // where whole blocks leave the busiest over kDirectRowsEvenSplit of an even share (each
    // kernel evens out its own row blocks).
    const int64_t rows_cap = direct_rows_cap(p, isa, caches);
    const int64_t rows_max = direct_tiling(isa == Isa::avx512, p.M, p.N, rows_cap).rows_max;
    const int64_t blocks = ceil_div(p.M, rows_max), tasks = std::min(T, blocks);
    s.chunk = ceil_div(blocks, tasks) * rows_max;
    if (double(s.chunk) > kDirectRowsEvenSplit * double(p.M) / double(tasks))
      s.chunk = ceil_div(p.M, tasks);
    s.nchunks = ceil_div(p.M, s.chunk);
    const int64_t last_chunk = p.M - (s.nchunks - 1) * s.chunk;
    for (int lc = 0; lc < 2; ++lc) {
      if (lc == 0 && s.nchunks == 1) continue;
      s.direct_rows[lc] = s.use(
          direct_desc(base, p, lc ? last_chunk : s.chunk, p.N, p.K, p.b.row_stride, rows_cap));
    }
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  // direct_k (k_split.cpp): a small C and a long K, A's and B's rows runs.
  if (direct_k_can) {
    s.plan_direct_k(p, base, threads, caches);
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  // BLIS blocking from the cache sizes.
  s.path = Path::packed;
  const bool b_transposed = p.b.row_stride == 1 && p.b.col_stride != 1;
  s.blk = packed_blocking(p.M, p.N, p.K, isa, threads, prepacked_b, caches, b_transposed);
  // AVX-512: A is packed by the kernels of each block's first column panel, which read it in
  // place (s.blk.a_rs). Its 14-row panels are otherwise packed by gathers in a pass before them,
  // with A's rows from L3 (9.5 GB/s, a memcpy's rate on this host) and nothing to overlap: 7% of
  // a 512^3 profile on one thread. The packing calls store each element they broadcast
  // (kern_packa). Intel Xeon, paired plans against the gathers, 2 threads,
  // OMP_WAIT_POLICY=passive: 1000x96x1000 1.09x, 517x333x701 1.09x, 300x200x500 1.08x, 1000^3
  // 1.05x, 256^3 1.05x, 384^3 1.05x, 512^3 1.04x, 420x300x300 1.02x, 2048^3 1.02x, 600x600x2048
  // 1.01x, 128x4096x1024, 100x4096x4096, 2000x2000x64 and 4000x4000x32 1.00x; one thread 512^3
  // 1.03x, 768^3 1.02x. In runs that favoured the new plan (oneDNN's spinning threads ran before
  // the other more often): A read in place by every call instead (no packing), 1000^3 0.91x and
  // 2048^3 0.90x (its rows 8 KiB apart share an L1 set); AVX2 (6-row panels by register
  // transposes) 0.98-1.05x, not taken.
  if (isa == Isa::avx512 && p.a.col_stride == 1 && p.a.row_stride > 0 &&
      p.a.row_stride <= kPackedMaxARowStride)
    s.blk.a_rs = p.a.row_stride;
  const PackedBlocking& b = s.blk;
  for (int acc = 0; acc < 2; ++acc) {
    for (int last = 0; last < 2; ++last) {
      // One K block: (first, last). Two: (first), (acc, last). More: also (acc, not last). K
      // split: (first), (acc), and (acc, last) for an epilogue after the sum.
      const bool needed = b.tk > 1     ? !last || (acc && base.has_epilogue())
                          : b.npc == 1 ? (!acc && last)
                                       : !(!acc && last) && (b.npc > 2 || acc == last);
      if (needed) s.use_packed(base, acc, last);
    }
  }
  return std::make_shared<GemmPlan>(std::move(impl));
}

void GemmPlan::Impl::run_direct(const GemmProblem& p) const {
  const KernelArgs args{p.epi.bias, p.epi.residual, p.K, 0, 0, p.epi.scale};
  const float* b = p.b.data;
  if (copy_b) {
    float* copy = thread_scratch(ScratchSlot::b_copy, size_t(p.K * p.N));
    copy_b_rowmajor(p.b, p.K, p.N, copy);
    b = copy;
  }
  direct->fn(&args, p.a.data, b, p.c);
}

void GemmPlan::Impl::run_direct_rows(const GemmProblem& p, ThreadPool* pool) const {
  parallel(pool, nchunks, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t r0 = c * chunk;
      const KernelArgs args{
          p.epi.bias, p.epi.residual ? p.epi.residual + r0 * p.epi.ld_residual : nullptr, p.K, 0, 0,
          p.epi.scale};
      direct_rows[c == nchunks - 1]->fn(&args, p.a.data + r0 * p.a.row_stride, p.b.data,
                                        p.c + r0 * p.ldc);
    }
  });
}

void GemmPlan::Impl::run_skinny(const GemmProblem& p, ThreadPool* pool) const {
  parallel(pool, nchunks, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t j0 = c * chunk;
      const int lc = c == nchunks - 1;
      for (int64_t b = 0; b < nkb; ++b) {
        const int kind = nkb == 1 ? 3 : b == 0 ? 0 : b == nkb - 1 ? 2 : 1;
        const int64_t k0 = b * kb;
        const KernelArgs args{p.epi.bias ? p.epi.bias + j0 : nullptr,
                              p.epi.residual ? p.epi.residual + j0 : nullptr,
                              0,
                              0,
                              0,
                              p.epi.scale};
        skinny[lc][kind]->fn(&args, p.a.data + k0 * p.a.col_stride,
                             p.b.data + k0 * p.b.row_stride + j0, p.c + j0);
      }
    }
  });
}

void GemmPlan::Impl::run_packed(const GemmProblem& p, ThreadPool* pool,
                                const PackedB* packed) const {
  const int64_t MR = blk.MR, NR = blk.NR, mtiles = blk.mtiles, npanels = blk.npanels, tm = blk.tm,
                tn = blk.tn, KC = blk.KC, npc = blk.npc, MC = blk.MC, NCP = blk.NCP, tk = blk.tk;
  const float* bpacked = nullptr;
  if (packed) {
    KILN_CHECK(packed->K() == K && packed->N() == N && packed->panel_width() == NR &&
               packed->isa() == isa)
        << "PackedB is " << packed->K() << "x" << packed->N() << " for " << isa_name(packed->isa())
        << ", the problem needs " << K << "x" << N << " for " << isa_name(isa);
    bpacked = packed->data();
  }
  const int64_t ldr = p.epi.ld_residual;
  // A packed by the kernels of the first panel over each block (blk.a_rs, baked into them).
  const bool a_in_kernel = blk.a_rs > 0;
  KILN_CHECK(!a_in_kernel || (p.a.row_stride == blk.a_rs && p.a.col_stride == 1))
      << "GemmPlan for A's rows " << blk.a_rs << " apart (unit columns) run on rows "
      << p.a.row_stride << " apart, columns " << p.a.col_stride << " apart";
  // K split: task kt > 0 sums its K blocks into partial buffer kt - 1 (M x N, rows N apart).
  float* partials =
      tk > 1 ? thread_scratch(ScratchSlot::k_partial, size_t((tk - 1) * M * N)) : nullptr;
  const int64_t ntasks = tm * tn * tk;
  // Panels shared with threads whose tasks are done (panel_share.h); not where row tiles run
  // outermost (each panel's calls then spread over the whole block).
  std::unique_ptr<PanelShare<SharedPanels>[]> shares;
  if (pool && pool->num_threads() > 1 && ntasks > 1 && !blk.rows_outer)
    shares = std::make_unique<PanelShare<SharedPanels>[]>(size_t(ntasks));
  parallel(pool, ntasks, [&](int64_t begin, int64_t end) {
    float* abuf = thread_scratch(ScratchSlot::a_block, size_t(std::max<int64_t>(MC * KC, 1)));
    float* bbuf = bpacked ? nullptr
                          : thread_scratch(ScratchSlot::b_packed,
                                           size_t(std::max<int64_t>(NCP * KC * NR, 1)));
    KernelArgs args{};
    args.ldr_bytes = ldr * 4;
    args.scale = p.epi.scale;
    // The task's C (p.c, or its partial buffer) and its first K block.
    float* c = p.c;
    int64_t ldc = p.ldc, pc_first = 0;
    PanelShare<SharedPanels>* share = nullptr;  // the task's, when shared
    auto panel = [&](const SharedPanels& s, int64_t q) {
      return bpacked ? bpacked + q * K * NR + s.pc * KC * NR : s.b + (q - s.jc) * s.kc * NR;
    };
    auto tile = [&](const SharedPanels& s, int64_t ir, int64_t jp) {
      return s.c + (s.i0 + ir) * s.ldc + jp * NR;
    };
    // The kernel over row tile ir and panel jp of s, told the next call's B stretch and C tile;
    // a_fresh: the call packs A's micro-panel (the first panel of a block, a_in_kernel).
    auto call = [&](const SharedPanels& s, int64_t ir, int64_t jp, const float* b_next,
                    const float* c_next, bool a_fresh) {
      const int64_t j0 = jp * NR;
      args.kc = s.kc;
      args.ldc_bytes = s.ldc * 4;
      args.bias = p.epi.bias ? p.epi.bias + j0 : nullptr;
      args.residual = p.epi.residual ? p.epi.residual + (s.i0 + ir) * ldr + j0 : nullptr;
      args.b_next = b_next;
      args.c_next = c_next;
      const int me = s.mc - ir < MR, ne = N - j0 < NR;
      if (a_fresh) {
        args.a_pack = s.a + ir * s.kc;
        kern_packa[s.acc][s.last][me][ne]->fn(&args, p.a.data + (s.i0 + ir) * blk.a_rs + s.k0,
                                              panel(s, jp), tile(s, ir, jp));
        return;
      }
      kern[s.acc][s.last][me][ne]->fn(&args, s.a + ir * s.kc, panel(s, jp), tile(s, ir, jp));
    };
    // Panel jp of s over all its row tiles. Micro-panel ir prefetches the ir-th stretch (one line
    // per unrolled K iteration) of the next panel; stretches past its end only touch memory that
    // is never read.
    auto run_panel = [&](const SharedPanels& s, int64_t jp, bool a_fresh) {
      const float* next = panel(s, jp + 1 < s.jc_end ? jp + 1 : jp);
      for (int64_t ir = 0; ir < s.mc; ir += MR)
        call(s, ir, jp, next + (ir / MR) * (s.kc / kPackedUnrollK) * kFloatsPerLine,
             ir + MR < s.mc      ? tile(s, ir + MR, jp)
             : jp + 1 < s.jc_end ? tile(s, 0, jp + 1)
                                 : tile(s, ir, jp),
             a_fresh);
    };
    // Kernels over column panels [jc, jc_end) and rows [i0, i0 + mc) for K block pc, with A's
    // block packed in abuf and B's in bbuf (or the PackedB): panel -> row tile, or row tile ->
    // panel (blk.rows_outer). Each call is told the next one's C tile (its own after the last).
    // a_fresh: A's block is not packed yet (a_in_kernel): the calls over the first panel pack it.
    auto compute = [&](int64_t jc, int64_t jc_end, int64_t pc, int64_t i0, int64_t mc,
                       bool a_fresh) {
      SharedPanels s;
      s.jc = jc, s.jc_end = jc_end, s.pc = pc, s.i0 = i0, s.mc = mc;
      s.k0 = pc * KC, s.kc = std::max<int64_t>(0, std::min(KC, K - s.k0));
      s.a = abuf, s.b = bbuf, s.c = c, s.ldc = ldc;
      s.acc = pc > pc_first, s.last = tk == 1 && pc == npc - 1;
      if (blk.rows_outer) {
        // After the first row tile B's block is in L2 (or L1) for the others.
        for (int64_t ir = 0; ir < mc; ir += MR)
          for (int64_t jp = jc; jp < jc_end; ++jp)
            call(s, ir, jp, panel(s, jp + 1 < jc_end ? jp + 1 : jc),
                 jp + 1 < jc_end ? tile(s, ir, jp + 1)
                 : ir + MR < mc  ? tile(s, ir + MR, jc)
                                 : tile(s, ir, jp),
                 a_fresh && jp == jc);
        return;
      }
      int64_t first = 0;
      if (a_fresh) run_panel(s, jc, true), first = 1;
      if (!share) {
        for (int64_t jp = jc + first; jp < jc_end; ++jp) run_panel(s, jp, false);
        return;
      }
      share->run_block(s, first, jc_end - jc,
                       [&](const SharedPanels& b, int64_t q) { run_panel(b, b.jc + q, false); });
    };
    auto pack_b = [&](int64_t jc, int64_t jc_end, int64_t pc) {
      if (bpacked) return;
      const int64_t k0 = pc * KC, kc = std::max<int64_t>(0, std::min(KC, K - k0));
      const MatrixRef brows{p.b.data + k0 * p.b.row_stride, p.b.row_stride, p.b.col_stride};
      pack_b_block(brows, kc, jc * NR, std::min(N, jc_end * NR) - jc * NR, NR, bbuf);
    };
    auto pack_a = [&](int64_t pc, int64_t i0, int64_t mc) {
      if (a_in_kernel) return;
      const int64_t k0 = pc * KC, kc = std::max<int64_t>(0, std::min(KC, K - k0));
      pack_a_block(p.a, i0, mc, k0, kc, MR, abuf);
    };
    for (int64_t t = begin; t < end; ++t) {
      const int64_t kt = t % tk, ti = t / tk / tn, tj = t / tk % tn;
      const int64_t pc0 = kt * npc / tk, pc1 = (kt + 1) * npc / tk;
      c = kt == 0 ? p.c : partials + (kt - 1) * M * N;
      ldc = kt == 0 ? p.ldc : N;
      pc_first = pc0;
      const int64_t r0 = ti * mtiles / tm * MR, r1 = std::min(M, (ti + 1) * mtiles / tm * MR);
      const int64_t q0 = tj * npanels / tn, q1 = (tj + 1) * npanels / tn;
      if (r0 >= r1) continue;
      share = shares ? &shares[t] : nullptr;
      if (share) share->open();
      if (blk.a_once) {
        // K block -> column block: each C tile still sees its K blocks in order.
        for (int64_t pc = pc0; pc < pc1; ++pc) {
          pack_a(pc, r0, r1 - r0);
          for (int64_t jc = q0; jc < q1; jc += NCP) {
            const int64_t jc_end = std::min(q1, jc + NCP);
            pack_b(jc, jc_end, pc);
            compute(jc, jc_end, pc, r0, r1 - r0, a_in_kernel && jc == q0);
          }
        }
      } else {
        for (int64_t jc = q0; jc < q1; jc += NCP) {
          const int64_t jc_end = std::min(q1, jc + NCP);
          for (int64_t pc = pc0; pc < pc1; ++pc) {
            pack_b(jc, jc_end, pc);
            for (int64_t i0 = r0; i0 < r1; i0 += MC) {
              const int64_t mc = std::min(MC, r1 - i0);
              pack_a(pc, i0, mc);
              compute(jc, jc_end, pc, i0, mc, a_in_kernel);
            }
          }
        }
      }
      if (share) share->close();
    }
    if (shares)
      help_open_shares(
          shares.get(), ntasks,
          [&](const SharedPanels& b, int64_t q) { run_panel(b, b.jc + q, false); }, kHelpPatience);
  });
  if (tk > 1) reduce_k_split(p, partials, pool);
}

void GemmPlan::Impl::run(const GemmProblem& p, ThreadPool* pool, const PackedB* packed) const {
  if (column_as_row) {
    KILN_CHECK(p.M == N && p.N == 1 && p.K == K)
        << "GemmPlan for " << N << "x1x" << K << " run on " << p.M << "x" << p.N << "x" << p.K;
    g_call_counts.add(kStream);
    return run_stream(row_problem_of_column(p), pool);
  }
  KILN_CHECK(p.M == M && p.N == N && p.K == K) << "GemmPlan for " << M << "x" << N << "x" << K
                                               << " run on " << p.M << "x" << p.N << "x" << p.K;
  switch (path) {
    case Path::empty:
      g_call_counts.add(kEmpty);
      return;
    case Path::direct:
      g_call_counts.add(kDirect);
      return run_direct(p);
    case Path::direct_rows:
      g_call_counts.add(kDirect);
      return run_direct_rows(p, pool);
    case Path::direct_k:
      g_call_counts.add(kDirect);
      return run_direct_k(p, pool);
    case Path::skinny:
      g_call_counts.add(kSkinny);
      return run_skinny(p, pool);
    case Path::stream:
      g_call_counts.add(kStream);
      return run_stream(p, pool);
    case Path::dot:
      g_call_counts.add(kDot);
      return run_dot(p, pool);
    case Path::packed:
      g_call_counts.add(kPacked);
      if (packed) g_call_counts.add(kPrepacked);
      return run_packed(p, pool, packed);
  }
}

void GemmPlan::run(const GemmProblem& p, ThreadPool& pool, const PackedB* packed) const {
  const Impl& s = *impl_;
  if (!s.run_direct_fast(p)) s.run(p, &pool, packed);
}

void GemmPlan::run_on(const GemmProblem& p, ThreadPool* pool, const PackedB* packed) const {
  const Impl& s = *impl_;
  if (!s.run_direct_fast(p)) s.run(p, pool, packed);
}

namespace {

// Plans memoized by everything but the data pointers.
struct PlanKey {
  int64_t M, N, K, a_rs, a_cs, b_rs, b_cs, ldc, ld_res;
  // isa (bits 0-7), prepacked (8), bias (9), scale (10), residual (11), dynamic m / nk (12-13),
  // activation (16-23), threads (32-63).
  uint64_t small;
  // Inlined, unrolled and branch-free: checked on every x86::gemm call against the thread's last
  // plan. A memcmp call there made a 16^3 call 1-7 ns slower (74-81 vs 73-74 ns); a 17-word key
  // compared word by word with an early exit took ~105 instructions, these 10 words ~30.
  bool operator==(const PlanKey& o) const {
    const auto *x = reinterpret_cast<const uint64_t*>(this),
               *y = reinterpret_cast<const uint64_t*>(&o);
    uint64_t diff = 0;
#pragma GCC unroll 16
    for (size_t i = 0; i < sizeof(*this) / 8; ++i) diff |= x[i] ^ y[i];
    return diff == 0;
  }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    const auto* w = reinterpret_cast<const int64_t*>(&k);
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof(k) / 8; ++i) h = (h ^ uint64_t(w[i])) * 0xff51afd7ed558ccdull;
    return size_t(h ^ (h >> 29));
  }
};

// Each thread's last plan (key and owner). Reached through an initial-exec pointer: a
// thread_local object with a destructor is a __tls_get_addr call per access in a shared library
// (~15 ns here); the owner below frees it when the thread exits.
struct LastPlan {
  PlanKey key{};
  std::shared_ptr<const GemmPlan> plan;
};
thread_local LastPlan* t_last_plan __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_last_plan_gone __attribute__((tls_model("initial-exec"))) = false;

LastPlan* last_plan() {
  if (t_last_plan || t_last_plan_gone) return t_last_plan;
  struct Owner {
    LastPlan plan;
    ~Owner() { t_last_plan = nullptr, t_last_plan_gone = true; }
  };
  thread_local Owner owner;
  return t_last_plan = &owner.plan;
}

// The plan for p, memoized by everything but the data pointers. A repeat of this thread's last
// problem returns its plan without the shared lock, the hash and a shared_ptr copy (four locked
// instructions, ~35 ns of a ~100 ns 16^3 call); the plan stays valid until this thread's next
// call. Otherwise the plan is found or made, and `keep` owns it.
const GemmPlan& plan_for(const GemmProblem& p, Isa isa, int threads, bool prepacked,
                         std::shared_ptr<const GemmPlan>& keep) {
  static std::shared_mutex mu;
  static auto* plans =
      new std::unordered_map<PlanKey, std::shared_ptr<const GemmPlan>, PlanKeyHash>();
  const bool res = p.epi.residual != nullptr;
  const uint64_t small = uint64_t(isa) | uint64_t(prepacked) << 8 |
                         uint64_t(p.epi.bias != nullptr) << 9 |
                         uint64_t(p.epi.scale != 1.0f) << 10 | uint64_t(res) << 11 |
                         uint64_t(p.dynamic_m) << 12 | uint64_t(p.dynamic_nk) << 13 |
                         uint64_t(uint8_t(p.epi.act)) << 16 | uint64_t(uint32_t(threads)) << 32;
  const PlanKey key{p.M,
                    p.N,
                    p.K,
                    p.a.row_stride,
                    p.a.col_stride,
                    p.b.row_stride,
                    p.b.col_stride,
                    p.ldc,
                    res ? p.epi.ld_residual : 0,
                    small};
  LastPlan* last = last_plan();
  if (last && last->plan && last->key == key) return *last->plan;
  {
    std::shared_lock lock(mu);
    auto it = plans->find(key);
    if (it != plans->end()) keep = it->second;
  }
  if (!keep) {
    auto plan = GemmPlan::make(p, isa, threads, prepacked);
    std::unique_lock lock(mu);
    // Symbolic extents make a plan per extent seen: keep the table bounded (plans are small and
    // quick to remake; the kernels they use stay in the registry).
    if (plans->size() >= kMaxPlans) plans->clear();
    keep = plans->try_emplace(key, std::move(plan)).first->second;
  }
  if (last) last->key = key, last->plan = keep;
  return *keep;
}

}  // namespace

void gemm(const GemmProblem& p, ThreadPool& pool, Isa isa) {
  std::shared_ptr<const GemmPlan> keep;
  plan_for(p, isa, pool.num_threads(), false, keep).run(p, pool);
}

void gemm(const GemmProblem& p, ThreadPool& pool) { gemm(p, pool, selected_isa()); }

void gemm_batched(const GemmProblem& p, int64_t batch, const BatchStrides& st, ThreadPool& pool,
                  Isa isa) {
  KILN_CHECK(batch >= 0) << "negative batch " << batch;
  if (batch == 0) return;
  // Valid for the whole batch: this thread makes no other plan_for call until it returns.
  // Small problems run one per task on the pool's threads, each alone: blocked for one thread.
  const bool small = p.M * p.N * p.K <= 4 * kSmallVolume;
  std::shared_ptr<const GemmPlan> keep;
  const GemmPlan* plan = &plan_for(p, isa, small ? 1 : pool.num_threads(), false, keep);
  auto item = [&](int64_t b) {
    GemmProblem q = p;
    q.a.data = p.a.data + b * st.a;
    q.b.data = p.b.data + b * st.b;
    q.c = p.c + b * st.c;
    if (p.epi.residual) q.epi.residual = p.epi.residual + b * st.residual;
    return q;
  };
  // Small problems: one per task across the pool; large ones: one after another, each parallel.
  if (small) {
    pool.parallel_for(batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) plan->run_on(item(b), nullptr);
    });
  } else {
    for (int64_t b = 0; b < batch; ++b) plan->run_on(item(b), &pool);
  }
}

void gemm_batched(const GemmProblem& p, int64_t batch, const BatchStrides& st, ThreadPool& pool) {
  gemm_batched(p, batch, st, pool, selected_isa());
}

std::shared_ptr<const PackedB> pack_b(MatrixRef b, int64_t K, int64_t N, Isa isa) {
  KILN_CHECK(K >= 0 && N >= 0) << "pack_b of " << K << "x" << N;
  const int64_t NR = packed_nr(isa), npanels = ceil_div(N, NR);
  const size_t bytes = size_t(std::max<int64_t>(npanels * K * NR, 16)) * sizeof(float);
  std::unique_ptr<float[], PackedB::FreeDeleter> data(
      static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  KILN_CHECK(data != nullptr) << "out of memory packing B (" << bytes << " bytes)";
  for (int64_t jp = 0; jp < npanels; ++jp)
    pack_b_panel(b, K, jp * NR, std::min(NR, N - jp * NR), NR, data.get() + jp * K * NR);
  return std::make_shared<PackedB>(isa, K, N, NR, std::move(data));
}

std::shared_ptr<const PackedB> pack_b(MatrixRef b, int64_t K, int64_t N) {
  return pack_b(b, K, N, selected_isa());
}

void gemm_prepacked(const GemmProblem& p, const PackedB& packed, ThreadPool& pool) {
  std::shared_ptr<const GemmPlan> keep;
  plan_for(p, packed.isa(), pool.num_threads(), true, keep).run(p, pool, &packed);
}

std::vector<KernelInfo> kernels_for(const GemmProblem& p, Isa isa) {
  return GemmPlan::make(p, isa, ThreadPool::global().num_threads())->kernels();
}

std::string listing_for(const GemmProblem& p, Isa isa) {
  return listing_of(*GemmPlan::make(p, isa, ThreadPool::global().num_threads()));
}

std::string listing_of(const GemmPlan& plan) {
  std::string out;
  for (const KernelInfo& k : plan.kernels()) {
    out += k.listing;
    out += "; codegen " + std::to_string(k.codegen_ms) + " ms, " + std::to_string(k.code_bytes) +
           " bytes\n\n";
  }
  return out;
}

std::string listing_for(const GemmProblem& p) { return listing_for(p, selected_isa()); }

GemmStats stats() {
  GemmStats s;
  for (size_t f = 0; f < kPaths; ++f) s.calls += g_call_counts.sum(f);
  s.direct_calls = g_call_counts.sum(kDirect);
  s.skinny_calls = g_call_counts.sum(kSkinny);
  s.stream_calls = g_call_counts.sum(kStream);
  s.dot_calls = g_call_counts.sum(kDot);
  s.packed_calls = g_call_counts.sum(kPacked);
  s.prepacked_calls = g_call_counts.sum(kPrepacked);
  s.kernels_generated = kernels_generated();
  s.codegen_ms_total = codegen_ms_total();
  s.codegen_ms_max = codegen_ms_max();
  s.kernels_loaded_from_disk = kernels_loaded_from_disk();
  s.kernels_stored_to_disk = kernels_stored_to_disk();
  s.kernels_not_cacheable = kernels_not_cacheable();
  s.disk_load_ms_total = disk_load_ms_total();
  s.disk_load_ms_max = disk_load_ms_max();
  return s;
}

}  // namespace kiln::x86
