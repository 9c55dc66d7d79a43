// The GEMM driver: picks a path for a problem and runs it over the thread pool (gemm_entry.cpp
// memoizes the plans for gemm.h's calls).
//   direct: M*N*K <= 64^3 (a GEMV the stream path can run: under 64 Ki elements of B): one fully
//   specialized unpacked kernel, single thread.
//   stream: M = 1 (GEMV): B streamed row by row into a chunk of C kept in L1, N chunks in
//   parallel, or (fewer chunks than threads) runs of K, partial rows added after them.
//   skinny (skinny_path.cpp): M <= 16 (AVX-512: 32) with unit-stride B columns and rows under a
//   page apart (M <= 12 at any row distance, in short K blocks): direct kernels over N chunks in
//   parallel.
//   direct_rows (direct_rows_path.cpp): B in a fifth of L2 (AVX-512: a tenth; half where C's
//   columns fit one column tile), A and B with unit column stride: direct kernels over M chunks
//   of whole row blocks in parallel (kDirectRowsBShare).
//   direct_k (k_split.cpp): a small C and a long K: direct kernels over K blocks, the
//   blocks split over the threads, partial sums added after them.
//   packed (packed_path.cpp): BLIS blocking (blocking.h: KC, MC and NC from the L2 size). One
//   task per thread owns a block of C (threads split M when each gets >= 16 row tiles, else N)
//   and packs privately, with no barriers: B per KC x NC block read row by row into [kc][NR]
//   panels (or taken from a PackedB), A per MC x KC block; then the microkernel over (B panel,
//   A micro-panel) pairs, the B panel staying in L1/L2 across the A panels. A thread whose tasks
//   are done runs column panels of the blocks still in progress, from their owners' packed A and
//   B (panel_share.h). With small M and N and a long K the tasks split K instead (blocking.cpp's
//   cost model; the sums as direct_k's, k_split.cpp).
// A GemmPlan resolves the path, blocking and every kernel once; run() only does pointer math.
#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/generators.h"
#include "codegen/x86/kernel_registry.h"
#include "codegen/x86/pack.h"
#include "jit/thread_pool.h"
#include "support/check.h"
#include "support/thread_counters.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kiln::x86 {

namespace {

// direct_rows: above kSmallVolume, the direct kernels (on one thread, or one chunk of M per
// thread) beat packing while B fits in this share of L2: each row block sweeps all of B from L2,
// its own A rows staying in L1. Measured on the Zen 3 (AVX2, 512 KiB L2), direct against packed,
// paired: one thread 96^3 1.15x, 100^3 1.22x, 128^3 1.10x, 120x64x256 1.08x, 300x100x100 1.15x,
// 100x100x300 1.22x, 200x200x128 1.04x (100 KiB of B), 1000x16x1000 1.54x, 2000x24x24 1.52x;
// two threads 1.01-1.23x over the same shapes. At the share's edge 256x256x100 (100 KiB) 0.98x
// on one thread, 1.08x on two; past it 256x256x128 0.98x, 150x300x200 0.98x, 256^3 0.84x,
// 100x1000x100 0.78x, 64x256x512 0.84x (one thread). The
// packed path pays for packing both operands and, at N = 100, for a 16-wide edge panel 4 columns
// full (the direct kernel's edge tile is one masked vector).
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
// A transposed A (x.T @ w: A stored [K, M], its columns runs) takes direct_rows while it fits in
// this share of L2: each k-step of a row block then loads one or two lines, M floats apart. Intel
// Xeon, paired plans, 2 threads, against the packed path (which packs A by gathers): AVX-512
// 65^3 2.90x, 128^3 1.39x, 100x300x50 1.51x, 128x64x200 1.93x, 160x100x200 2.34x, 1000x64x64
// 1.30x, 2000x24x24 1.57x, 512x32x512 1.49x, 64x16x4096 2.99x, 256x64x1024 1.31x, 128^3 with a
// transposed B too 1.19x; KILN_ISA=avx2 128^3 1.28x, 65^3 1.84x, 2000x24x24 1.71x. Past it, A
// streams from L3 a line per k-step and row, a page apart where M >= 1024: 512x32x1024 (2 MiB)
// 1.00x, 2048x32x256 0.90x, 2048x32x512 0.85x, 3000x32x600 0.75x, 2048x64x1024 0.74x,
// 1024x64x1024 0.96x (some wins too: 1536x32x1024 1.28x, 4096x16x512 1.24x). On the Zen 3
// (AVX2, 32 KiB 8-way L1) an earlier session measured 0.88x at 128^3 and 0.93x at 160x100x200.
constexpr int64_t kDirectRowsATransposedShare = 2;

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
  kPrepacked = kPaths,
  kEdgeSplit,
  kTransposed,
};
constexpr size_t kCallCountFields = kPaths + 3;
constinit ThreadCounters<kCallCountFields> g_call_counts;

// A GEMV of at least kStreamOverDirect elements of B takes the stream path even within the small
// volume (the direct kernel walks B's rows down each 64-column tile, on one thread). Measured on
// the Zen 3, stream against direct, paired plans, 2 threads (1): B in cache 1x512x512 1.96x
// (1.09x), 1x1024x256 3.39x (2.11x), 1x2048x128 2.82x (2.02x), 1x128x1024 1.75x, 1x256x256 1.00x
// (1.17x), 1x300x200 1.11x, 1x200x300 0.93x, 1x128x512 0.84x (1.00x), 1x64x1024 1.19x (0.87x);
// B from memory (weights rotated over 256 MB) 1.76-2.57x (1.00-1.66x). Below it, 1x100x100
// 0.83x (0.67x).
constexpr int64_t kStreamOverDirect = 64 * 1024;
// The packed path's largest volume (M * N * K) with symbolic dims that runs on one thread.
constexpr int64_t kPackedSplitMaxVolume = 128 * 1024;

// B packed by the kernels of the first row tile over each panel, which read its rows in place
// (PackedBlocking::b_rs), instead of by pack_b_block before them: its rows come from memory while
// the kernel's FMAs run. Each packed element feeds every row tile of the task; with few tiles the
// packing weighs most.
// On split-256 cores, every packed plan that can. AMD EPYC Zen 1, paired plans, 2 threads,
// against B packed before them: 35x1811x2726 1.10x (pack_b_rows16 had 16% of its samples),
// 48x1811x2726 1.09x, 35x500x2726 1.12x, 64x4096x1024 1.03x, 24x4096x1024 1.04x, 100x1000x1000
// 1.03x, 48x4096x1024 1.02x (1.00-1.16), 128x4096x1024 1.02x (0.94-1.02), 512^3 1.00x
// (0.97-1.00). With several MC blocks the first block's calls pack (run_packed's b_fresh);
// paired plans against B packed before them, 2 threads: 384^3 1.03x, 512^3 1.01-1.02x,
// 517x333x701 1.02x, 1000x4000x300 1.02x, 768^3 1.01x, 1000^3 1.00-1.02x, 2048^3 1.01x, 256^3
// 1.01x (0.99-1.03), 4000x1000x300 1.00x, 512^3 with A transposed 1.00x (pack_b_rows16 had 2.9%
// of 512^3's samples; the packing calls 3.1%, with the FMAs beside them). Not on Intel's Xeon
// (AVX-512: 16x1024x1024 0.81-1.02x, 128x4096x1024 0.85-0.90x) nor the Zen 3 (AVX2: 48x4096x1024
// 0.91x, 24x4096x1024 0.82x, 128x4096x1024 0.96x).
// On a Zen 5 (AMD EPYC family 1Ah), for at most kZen5BInKernelMaxRows rows against a B whose
// share per column task is past kZen5BInKernelMinL2s L2s. Paired plans, 2 threads, AVX-512
// (where A is then packed before the kernels instead of by them, blk.a_rs): 16x4096x1024 1.42x,
// 13x4096x1024 1.36x, 32x4096x1024 1.24x, 48x4096x1024 1.14x, 64x4096x1024 1.12x, 96x4096x1024
// 1.07x, 128x4096x1024 1.02x, 32x1024x4096 1.22x, 24x1811x2726 1.76x, 32x1200x1200 1.32x,
// 64x1200x1200 1.16x, 32x2048x2048 1.18x, 64x2048x2048 1.06x, 128x2048x2048 1.06x, 32x2000x1000
// 1.27x, 32x11008x4096 1.33x, 32x4096x11008 1.07x, 64x4096x4096 1.18x; AVX2: 16x4096x1024
// 1.09x, 32x4096x1024 1.10x, 128x4096x1024 1.05x, 32x1200x1200 1.14x, 64x2048x2048 1.08x. Where
// B's share fits twice L2: 32x1024x1024 0.92-0.98x (AVX2 0.94x), 64x1024x1024 0.95-0.98x,
// 96x1024x1024 0.98x, 32x1000x1000 1.01x, 64x1000x1000 1.03x; past the rows: 192x4096x1024
// 0.995x, 256x4096x1024 0.97x, 512^3 0.91x, 1000^3 0.91x, 2048^3 0.95x.
constexpr int64_t kZen5BInKernelMaxRows = 128;
constexpr int64_t kZen5BInKernelMinL2s = 2;

bool b_packed_in_kernels(const GemmProblem& p, const PackedBlocking& blk, bool prepacked_b,
                         const CacheSizes& caches) {
  if (prepacked_b || blk.rows_outer || blk.tk != 1 || p.N < blk.NR || p.b.col_stride != 1 ||
      p.b.row_stride <= 0 || p.b.row_stride > kPackedMaxBRowStride)
    return false;
  if (caches.split_256) return true;
  const int64_t task_b_bytes = p.K * ceil_div(p.N, blk.tn) * int64_t(sizeof(float));
  return caches.amd_zen5 && p.M <= kZen5BInKernelMaxRows &&
         task_b_bytes > kZen5BInKernelMinL2s * caches.l2_bytes;
}

}  // namespace

bool direct_disp_fits(const GemmProblem& p, int64_t rows, int64_t cols, int64_t b_rs) {
  auto mag = [](int64_t v) { return v < 0 ? -v : v; };
  const int64_t elems = rows * mag(p.a.row_stride) + (p.K + 16) * mag(p.a.col_stride) +
                        (p.K + 16) * mag(b_rs) + rows * mag(p.ldc) + rows * mag(p.epi.ld_residual) +
                        cols + 64;
  return elems < (int64_t{1} << 28);
}

KernelDesc epilogue_desc(const GemmProblem& p, Isa isa) {
  KernelDesc d;
  d.isa = int64_t(isa);
  d.has_bias = p.epi.bias != nullptr;
  d.has_col_scale = p.epi.col_scale != nullptr;
  d.has_scale = p.epi.scale != 1.0f;
  d.act = int64_t(p.epi.act);
  d.has_residual = p.epi.residual == nullptr ? kResidualNone
                   : p.epi.residual_mul      ? kResidualMul
                                             : kResidualAdd;
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

// A 16^3 GEMM takes ~50 ns; a further call, frame and path switch were ~10% of it.
[[gnu::always_inline]] inline bool GemmPlan::Impl::direct_fits(const GemmProblem& p) const {
  return path == Path::direct && !copy_b && p.M == M && p.N == N && p.K == K;
}

[[gnu::always_inline]] inline void GemmPlan::Impl::run_direct_fast(const GemmProblem& p) const {
  g_call_counts.add(kDirect);
  // Without bias, residual or scale the arguments are the plan's own, and the kernel is the
  // call's last step: a jump to it, with no frame to build or unwind. Known from the plan: a
  // test of the problem's four epilogue fields here cost ~1 ns of a 16^3 call where C's rows
  // straddle lines (C 16 bytes off a line: the kernel's stores split).
  if (direct_bare) return direct->fn(&bare_args, p.a.data, p.b.data, p.c);
  KernelArgs args{nullptr, p.epi.residual, p.K, 0, 0, p.epi.scale};
  set_columns(args, p.epi, 0);
  direct->fn(&args, p.a.data, p.b.data, p.c);
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
// Since up to four rows a pass (AVX-512) and two on AVX2, the multi-row rule is kept for both.
// Probe of plans side by side (B in L2, 2 threads, Emerald Rapids), read in place against
// packed once: AVX-512 3x1024x1024 1.15x, 4x1024x1024 1.34x, 4x256x1024 1.29x, 3x4096x4096
// 0.96x, 4x4096x4096 0.86x, 4x128x4096 0.91x, 8x1024x1024 0.60x, 8x64x4096 0.67x; AVX2
// 2x4096x4096 1.11x, 4x64x4096 1.26x, 8x64x4096 0.99x, 3x1024x1024 0.75x, 4x128x4096 0.94x,
// 8x4096x4096 0.57x. The same probe at the commit before put 8x64x4096 at 0.55x, not the 2.31x
// above (the packed path has changed since): the narrow, many-row corner is not settled.
constexpr int64_t kDotPackedMinCols = 64;
constexpr int64_t kDotMultiPackedMinRows = 3;
constexpr int64_t kDotMultiPackedMinCols = 128;
// direct_k (AVX-512) over a wide C and a K of up to a few K blocks: packed once pays, where its
// K split does not. Intel Xeon, 2 threads, paired, read in place against packed once:
// 16x256x256 0.90x, 24x256x256 0.88x, 48x256x256 0.91x, 64x256x256 0.86x, 32x256x384 0.84x,
// 32x256x512 0.85x, 64x256x512 0.94x, 32x192x512 0.91x, 64x256x768 0.95x, 32x256x1024 0.92x,
// 64x256x1024 0.99x; 16x256x512 1.01x. Narrower or longer, in place wins: 32x128x768 1.00x,
// 64x128x512 1.04x, 128x128x1024 1.17x, 128x64x1024 1.27x, 8x256x1024 1.13x, 24x256x2048 1.07x,
// 16x128x4096 1.37x, 64x64x4096 1.53x, 16x16x8192 2.98x.
constexpr int64_t kDirectKPackedMinCols = 192;
constexpr int64_t kDirectKPackedMaxK = 1024;
// The stream path over a few rows (stream_rows_for): the packed path over B packed once runs
// faster. AMD EPYC Zen 3, 2 threads, paired, read in place against packed once: 2x4096x1024
// 0.95x, 4x1024x2048 0.68x, 4x4096x1024 0.64x, 8x4096x1024 0.64x, 12x4096x1024 0.62x,
// 8x1024x1024 0.64x, 4x4096x4096 0.71x, 8x2048x128 0.75x.
// Skinny (AVX-512) with B within half of L2 reads it in place faster than the packed path runs
// a packed copy (the packed copy pays from B in L3 on). Intel Xeon (2 MiB L2), 2 threads,
// paired, read in place against packed once: 8x256x256 1.36x, 8x256x512 1.25x, 12x256x512
// 1.18x, 8x512x512 1.13x, 16x512x512 1.05x, 24x512x512 1.01x; past it 8x640x640 1.11x,
// 16x768x512 1.08x, 4x768x768 1.12x but 8x512x1024 0.71x, 8x1024x512 0.68x, 4x1024x1024 0.59x,
// 8x1024x1024 0.54x, 12x2048x512 0.53x, 8x4096x1024 0.88x. Up to 16 rows: past them (kernels
// of several row blocks, column tiles outer) 24x128x128 0.82x, 20x300x300 0.90x, 28x512x512
// 0.90x, 24x512x512 1.03x. AVX2 (its skinny kernels are narrower) 8x256x256 1.01x, 8x512x512
// 0.93x, 8x1024x1024 0.69x: packed once there.
constexpr int64_t kSkinnyInPlaceL2Share = 2;
constexpr int64_t kSkinnyInPlaceMaxRows = 16;
bool GemmPlan::prepacked_b_pays() const {
  const Impl& s = *impl_;
  if (s.path == Path::edge_split) return s.split_main->prepacked_b_pays();
  const bool multi = s.dot_vecs > 1;  // several rows of A a pass over W (dot_path.cpp)
  // A direct kernel over a B without unit column stride copies it row-major on every call.
  const bool skinny_in_place = s.isa == Isa::avx512 && s.M <= kSkinnyInPlaceMaxRows &&
                               s.K * s.N * 4 <= s.l2_bytes / kSkinnyInPlaceL2Share;
  return (s.path == Path::packed && s.blk.tk == 1) ||
         (s.path == Path::skinny && !skinny_in_place) ||
         (s.path == Path::direct_k && s.isa == Isa::avx512 && s.N >= kDirectKPackedMinCols &&
          s.K <= kDirectKPackedMaxK) ||
         ((s.path == Path::direct || s.path == Path::direct_rows) && s.copy_b) ||
         (s.path == Path::stream && s.M > 1) ||
         (s.path == Path::dot && s.dot_over == DotOver::b_rows && s.M > 1 &&
          s.N >= (multi ? kDotMultiPackedMinCols : kDotPackedMinCols) &&
          (!multi || s.M >= kDotMultiPackedMinRows));
}

bool GemmPlan::reads_packed_b() const { return impl_->prepacked_b; }

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
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.isa = isa;
  s.runnable = isa_supported(isa);
  s.M = p.M;
  s.N = p.N;
  s.K = p.K;
  s.prepacked_b = prepacked_b;
  s.l2_bytes = caches.l2_bytes;
  if (p.M == 0 || p.N == 0) return std::make_shared<GemmPlan>(std::move(impl));

  const KernelDesc base = epilogue_desc(p, isa);
  const bool b_unit = p.b.col_stride == 1;
  const int64_t volume = p.M * p.N * p.K;
  const bool stream = stream_can(p, prepacked_b);
  if (const DotOver over = dot_path_for(p, isa, prepacked_b, caches); over != DotOver::none) {
    s.plan_dot(p, over, base, threads, caches);
    return std::make_shared<GemmPlan>(std::move(impl));
  }
  if (!prepacked_b && s.plan_edge_split(p, threads, caches))
    return std::make_shared<GemmPlan>(std::move(impl));
  if (column_as_row_fits(p)) {
    const GemmProblem t = row_problem_of_column(p);
    if (stream_can(t, prepacked_b) && (volume > kSmallVolume || t.N * t.K >= kStreamOverDirect)) {
      s.column_as_row = true;
      s.M = t.M;
      s.N = t.N;
      KernelDesc tbase = epilogue_desc(t, isa);
      tbase.bias_bcast = tbase.has_bias || tbase.has_col_scale;
      s.plan_stream(t, tbase, std::max(1, threads));
      return std::make_shared<GemmPlan>(std::move(impl));
    }
  }
  if (!prepacked_b && s.plan_transposed(p, base, threads, caches))
    return std::make_shared<GemmPlan>(std::move(impl));
  const int64_t T = std::max(1, threads);
  // x.T @ w: A stored [K, M], its columns runs (the direct kernels read it in place too).
  const bool a_transposed = p.a.col_stride != 1 && p.a.row_stride == 1;
  if (!prepacked_b && volume <= kSmallVolume && !p.dynamic_m && !p.dynamic_nk &&
      !(stream && p.N * p.K >= kStreamOverDirect) &&
      direct_disp_fits(p, p.M, p.N, b_unit ? p.b.row_stride : p.N)) {
    // On two threads or more, from kSmallSplitMinFmas: direct_rows in chunks of rows, one per
    // thread, handed over by ThreadPool::run_parts (where M makes two chunks).
    if (T > 1 && p.M * ceil_div(p.N, isa_lanes(isa)) * p.K >= kSmallSplitMinFmas &&
        (p.a.col_stride == 1 || a_transposed) && !p.epi.col_scale &&
        s.plan_direct_rows(p, base, T, caches, /*split_only=*/true))
      return std::make_shared<GemmPlan>(std::move(impl));
    // C's rows in one row block: skinny's chunks of columns, one per thread, where it takes
    // the problem and makes two chunks. Paired plans against one direct kernel, Intel Xeon, 2
    // threads: 2x2048x64 1.45x, 2x4096x32 1.36x, 3x1000x80 1.31x, 4x1024x64 1.20x, 8x256x128
    // 1.21x, 10x400x64 1.21x, 8x512x64 1.18x, 5x600x80 1.13x, 6x400x100 1.11x, 12x200x100 1.03x,
    // 8x300x100 0.98x (chunks of 192 and 108 columns); KILN_ISA=avx2 2x2048x64 1.82x, 4x1024x64
    // 1.54x, 6x400x100 1.54x.
    if (T > 1 && p.M * ceil_div(p.N, isa_lanes(isa)) * p.K >= kSmallSplitMinFmas &&
        p.N > skinny_chunk_cols(p, T, isa) &&
        s.plan_skinny(p, base, T, prepacked_b, /*direct_k_can=*/false, caches))
      return std::make_shared<GemmPlan>(std::move(impl));
    s.path = Path::direct;
    s.copy_b = !b_unit;
    s.bare_args.kc = p.K;
    s.direct_bare = !(base.has_bias || base.has_scale || base.has_residual || base.has_col_scale);
    s.direct = s.use(direct_desc(base, p, p.M, p.N, p.K, b_unit ? p.b.row_stride : p.N,
                                 direct_rows_cap(p, isa, caches)));
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  if (stream) {
    s.plan_stream(p, base, T);
    return std::make_shared<GemmPlan>(std::move(impl));
  }
  if (stream_rows_for(p, isa, prepacked_b, caches)) {
    s.plan_stream_rows(p, base, T);
    return std::make_shared<GemmPlan>(std::move(impl));
  }
  // direct_k (k_split.cpp) where it fits, also over the skinny path's rows: skinny splits only N,
  // and a narrow C with a long K ran on one chunk there (direct_k against skinny, Intel Xeon, 2
  // threads: 4x64x8192 1.91x, 9x100x4096 1.85x, 16x128x4096 1.88x, 2x200x2048 1.67x, 8x100x4096
  // 1.13x; with two chunks of N, 8x256x2048 0.99x). A transposed A too (its K blocks are runs
  // of A's rows): against the packed path or skinny, Intel Xeon, 2 threads, paired plans,
  // 1024x32x8192 1.44x, 512x32x4096 1.76x, 128x64x4096 1.35x, 100x100x1000 1.58x, 64x48x8192
  // 1.76x, 16x16x8192 1.53x, 24x64x16384 1.96x, 11x8x3000 1.04x, 8x256x1000 0.98x; KILN_ISA=avx2
  // 1.29-1.67x (64x64x4096, 32x32x8192, 512x32x4096, 1024x16x4096, 16x16x8192).
  const bool direct_k_can = !prepacked_b && b_unit && (p.a.col_stride == 1 || a_transposed) &&
                            !p.dynamic_m && !p.dynamic_nk && direct_k_fits(p.M, p.N, p.K, T, isa) &&
                            !b_rows_page_apart(p) && direct_disp_fits(p, p.M, p.N, p.b.row_stride);
  if (s.plan_skinny(p, base, T, prepacked_b, direct_k_can, caches))
    return std::make_shared<GemmPlan>(std::move(impl));

  // C's columns in one column tile of the direct tiling: each row block reads A's rows once.
  const bool one_tile =
      p.N <= int64_t(direct_tiling(isa == Isa::avx512, p.M, p.N).vectors) * isa_lanes(isa);
  // A transposed A within its share of L2 (kDirectRowsATransposedShare): direct_rows, where M
  // makes more than one row block, before direct_k (direct_k against it, Intel Xeon, 2 threads:
  // 37x45x2100 0.79x, 40x40x4096 0.82x, 48x48x4096 0.94x, 64x64x2048 0.93x, 128x64x1024 0.93x,
  // 256x64x1000 0.96x; 64x64x4096 1.38x).
  const bool a_transposed_fits =
      a_transposed && !p.dynamic_m &&
      p.M * p.K * 4 <= int64_t(caches.l2_bytes) / kDirectRowsATransposedShare;
  const bool a_transposed_rows =
      a_transposed_fits && p.M > direct_tiling(isa == Isa::avx512, p.M, p.N).rows_max;
  const int64_t rows_b_share = one_tile && (!direct_k_can || a_transposed_rows)
                                   ? kDirectRowsBShareOneTile
                               : isa == Isa::avx2 ? kDirectRowsBShare
                                                  : kDirectRowsBShareAvx512;
  const bool wide_and_tall =
      !one_tile && p.M >= kDirectRowsWideMinRows && p.N > kDirectRowsWideMaxCols;
  // (direct_rows' run_parts payload has no room for a column scale: such problems take the
  // paths below.)
  // A B whose columns are not unit-stride (x @ w.T) is copied row-major on each call, as the
  // direct path does (the packed path packs it too, and A besides).
  if (!prepacked_b && (p.a.col_stride == 1 || a_transposed_fits) && !p.dynamic_nk &&
      !p.epi.col_scale && !wide_and_tall && !(p.dynamic_m && p.M <= kDynamicDirectMinRows) &&
      p.N <= caches.l2_bytes / rows_b_share / 4 / std::max<int64_t>(1, p.K) &&
      !(b_unit && b_rows_page_apart(p)) &&
      direct_disp_fits(p, p.M, p.N, b_unit ? p.b.row_stride : p.N)) {
    s.plan_direct_rows(p, base, T, caches, /*split_only=*/false);
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  // direct_k (k_split.cpp): a small C and a long K, B's rows runs and A's rows or columns.
  if (direct_k_can) {
    s.plan_direct_k(p, base, threads, caches);
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  // x @ W.T that the dot path runs faster than the packed path, on some cores (dot_path.cpp,
  // kDotMaxRowsOverPacked).
  if (const DotOver over = dot_path_for(p, isa, prepacked_b, caches, /*instead_of_packed=*/true);
      over != DotOver::none) {
    s.plan_dot(p, over, base, threads, caches);
    return std::make_shared<GemmPlan>(std::move(impl));
  }

  // BLIS blocking from the cache sizes.
  s.path = Path::packed;
  const bool b_transposed = p.b.row_stride == 1 && p.b.col_stride != 1;
  // Symbolic dims up to kPackedSplitMaxVolume (exact problems that small take the direct paths),
  // one thread: the packing both threads do and the hand-over cost more than the halved
  // arithmetic saves. Paired plans, all dims symbolic, 2 threads against 1: 16x64x64
  // 0.62x, 48^3 0.84x, 32x64x64 0.84x, 8x128x128 0.87x, 128x32x32 0.95x, 23x57x91 0.97x,
  // 64x32x64 1.00x, 256x16x32 1.17x; above it 40x40x100 0.89x, 100x50x30 1.07x, 56^3 1.01x, 64^3
  // 1.10x (split over M), 80^3 1.30x.
  const int packed_threads =
      (p.dynamic_m || p.dynamic_nk) && volume <= kPackedSplitMaxVolume ? 1 : threads;
  s.blk = packed_blocking(p.M, p.N, p.K, isa, packed_threads, prepacked_b, caches, b_transposed);
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
  // transposes) 0.98-1.05x, not taken. AVX2 on an AMD EPYC Zen 1 (B packed in the kernels too),
  // paired plans against pack_a_panel6: 384^3 1.02x, 512^3 1.01x, 768^3 1.01x, 1000^3 1.00x,
  // 517x333x701 1.00x, 256^3 0.98x, 300x200x500 0.98x; not taken.
  // The kernels pack one operand: B where b_packed_in_kernels says so (above), else A.
  if (b_packed_in_kernels(p, s.blk, prepacked_b, caches))
    s.blk.b_rs = p.b.row_stride;
  else if (isa == Isa::avx512 && p.a.col_stride == 1 && p.a.row_stride > 0 &&
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
  KernelArgs args{nullptr, p.epi.residual, p.K, 0, 0, p.epi.scale};
  set_columns(args, p.epi, 0);
  const float* b = p.b.data;
  if (copy_b) {
    float* copy = thread_scratch(ScratchSlot::b_copy, size_t(p.K * p.N));
    copy_b_rowmajor(p.b, p.K, p.N, copy);
    b = copy;
  }
  direct->fn(&args, p.a.data, b, p.c);
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
    case Path::edge_split:
      g_call_counts.add(kEdgeSplit);
      return run_edge_split(p, pool);
    case Path::transposed:
      g_call_counts.add(kTransposed);
      return run_transposed(p, pool);
  }
}

bool GemmPlan::caller_only() const {
  const Impl& s = *impl_;
  if (s.path == Path::edge_split) return s.split_main->caller_only() && s.split_edge->caller_only();
  if (s.path == Path::transposed) return s.transposed_plan->caller_only();
  return s.path == Path::direct || s.path == Path::empty ||
         (s.path == Path::dot && s.nchunks <= 1) ||
         (s.path == Path::packed && s.blk.tm * s.blk.tn * s.blk.tk == 1);
}

void GemmPlan::run(const GemmProblem& p, ThreadPool& pool, const PackedB* packed) const {
  const Impl& s = *impl_;
  KILN_CHECK(s.runnable) << "this CPU cannot run " << isa_name(s.isa) << " kernels";
  if (s.direct_fits(p)) return s.run_direct_fast(p);
  s.run(p, &pool, packed);
}

void GemmPlan::run_on(const GemmProblem& p, ThreadPool* pool, const PackedB* packed) const {
  const Impl& s = *impl_;
  KILN_CHECK(s.runnable) << "this CPU cannot run " << isa_name(s.isa) << " kernels";
  if (s.direct_fits(p)) return s.run_direct_fast(p);
  s.run(p, pool, packed);
}

GemmStats stats() {
  GemmStats s;
  for (size_t f = 0; f < kPaths; ++f) s.calls += g_call_counts.sum(f);
  s.direct_calls = g_call_counts.sum(kDirect);
  s.skinny_calls = g_call_counts.sum(kSkinny);
  s.stream_calls = g_call_counts.sum(kStream);
  s.dot_calls = g_call_counts.sum(kDot);
  s.packed_calls = g_call_counts.sum(kPacked);
  s.prepacked_calls = g_call_counts.sum(kPrepacked);
  s.edge_split_calls = g_call_counts.sum(kEdgeSplit);
  s.transposed_calls = g_call_counts.sum(kTransposed);
  const SymbolicPlanCounts sym = symbolic_plan_counts();
  s.symbolic_exact_plans = sym.exact_plans;
  s.symbolic_exact_kernels = sym.exact_kernels;
  s.symbolic_bounded_plans = sym.bounded_plans;
  s.kernels_generated = kernels_generated();
  s.codegen_ms_total = codegen_ms_total();
  s.codegen_ms_max = codegen_ms_max();
  s.kernels_loaded_from_disk = kernels_loaded_from_disk();
  s.kernels_stored_to_disk = kernels_stored_to_disk();
  s.kernels_not_cacheable = kernels_not_cacheable();
  s.disk_load_ms_total = disk_load_ms_total();
  s.disk_load_ms_max = disk_load_ms_max();
  s.pool_busy_fallbacks = ThreadPool::busy_fallbacks_total();
  s.pool_parts_taken_back = ThreadPool::parts_taken_back_total();
  return s;
}

}  // namespace kiln::x86
