// The dot path: GEMV-like problems whose large operand is read along its rows, each output one dot
// product over K (dot_kernel.cpp). Two layouts reach it:
//   DotOver::b_rows: x @ W.T with W [N, K] row-major (B's element (k, j) at j * col_stride + k),
//   the layout of a linear layer's weight; up to 8 rows of A (16 on AVX-512, dot_max_rows).
//   DotOver::a_rows: A @ B with up to kDotMaxCols columns of B (AVX-512, with many rows: up to
//   kDotMaxColsWide) and A's rows unit-stride along K
//   (B's columns, copied contiguous where they are not, are the vectors).
// Both packed B (or A) on every call before (the BLIS path), and ran at 2-3 GB/s on the Zen 3
// (one column; 2-4 columns ran 5-11 GB/s on the direct and packed paths).
// Outputs are split into one chunk per thread. With several vectors, each chunk is walked in
// blocks of rows of X that stay in L2 while every vector takes its dot products with them, so X
// is read from memory once.
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/pack.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace kiln::x86 {

namespace {

// Rows of A (DotOver::b_rows). On AVX-512, x @ W.T takes up to 16 rows (four a pass, below),
// from K = 8 M past 8 rows (dot_min_k_b_rows), where the other paths copy or pack B on every
// call: paired plans on 2 threads against the direct and packed paths (Intel Xeon, M 9 / 12 /
// 16, N 16-1000, K 64-1024, 126 shapes): the 105 from that K 0.87-4.0x, median 1.8x (9x21x211
// 1.76x, 12x21x300 2.03x, 9x1000x211 2.02x, 16x1000x1024 1.71x; lowest 16x16x211 0.87x, 16x64x211
// 0.90x, 16x16x128 0.91x); at K = 64 0.66-1.29x. Past 16 rows the packed path wins as often as
// not (32x64x300 0.64x, 32x1000x128 0.91x, 24x256x300 1.61x). AVX2 (one row a pass) at 9-16
// rows: 0.60-1.77x (16x64x211 0.60x, 12x16x1024 0.78x), so 8 there. One column (N = 1) keeps 8.
// With four rows a pass (two on AVX2), from kDotWideMinCols columns twice the rows, from K = 8 M
// (paired plans, 2 threads, Emerald Rapids, against the paths taken before): AVX-512 17-32 rows
// 17x1000x256 2.22x, 17x2000x300 1.37x, 24x256x300 1.65x, 24x1000x192 1.38x, 24x4096x1024 1.46x,
// 25x300x1000 1.38x, 28x200x256 1.47x, 30x512x256 1.40x, 32x128x256 1.24x, 32x128x512 1.42x,
// 32x1000x1024 1.54x, 32x1074x745 1.01x, 32x2048x2048 1.24x, 32x4096x4096 1.17x, 32x4096x256
// 1.13x, 32x128x4096 1.09x; the misses 17x128x136 0.90x, 18x128x144 0.95x, 32x4096x11008 0.96x,
// 32x11008x4096 0.98x; AVX2 9-16 rows 16x1000x1024 1.41x, 12x4096x1024 1.32x, 16x256x512 1.83x,
// 10x128x300 1.75x, 9x1000x211 1.77x, 16x4096x4096 1.17x, the miss 16x128x128 0.95x. Narrower,
// the direct path (B copied) holds its own: AVX-512 20x64x300 0.91x, 32x64x300 0.67x, 20x96x300
// 0.85x, 32x16x1024 0.96x, but 24x64x512 1.70x, 32x100x512 1.81x; AVX2 16x64x211 0.80x,
// 12x16x1024 0.95x, but 9x21x211 1.69x. Past 32 rows the packed path's kernels catch up (AVX-512
// 48x4096x4096 0.96x, 64x4096x4096 0.87x; 64x1000x1024 1.22x).
constexpr int64_t kDotMaxRows = 8;
// From K = kDotAlignMinK, the kernels align X's loads at run time (k_align, dot_kernel.cpp)
// where X's rows are whole vectors apart. Paired plans, 2 threads, Emerald Rapids, against the
// kernel without, operands 16 bytes off a line (as malloc and NumPy give), x @ W.T:
// - AVX-512 (to 64-byte lines): 32x4096x4096 1.45x, 32x4096x11008 1.41x, 16x1000x1024 1.45x,
//   8x1024x1024 1.33x, 2x1024x768 1.47x, 1x512x512 1.45x, 1x1024x1024 1.10x, 16x512x512 1.27x,
//   4x256x256 1.12x, 16x256x256 1.00x; on 64-byte lines (no head) 0.96-1.01x (16x256x256 0.96x,
//   16x512x512 0.98x). Below 256 the extra masked steps cost more than the split loads
//   (16x128x128 0.86x, 8x64x192 0.95x).
// - AVX2 (to 32 bytes): 8x1024x1024 1.39x, 16x1000x1024 1.39x, 2x1024x768 1.35x, 1x512x512
//   1.33x, 4x256x256 1.15x, 4x4096x4096 1.10x, 1x512x128 1.16x, 4x256x128 1.09x, 8x1024x128
//   1.02x, 16x128x128 0.99x; on 32 bytes 0.97-1.03x. At K = 64 mixed (8x64x64 0.93x, 1x256x64
//   1.35x).
constexpr int64_t kDotAlignMinK[2] = {128, 256};  // [avx512]
// From this many outputs (X's rows), a v that sits off its line a different distance than X (or
// is copied anyway) is copied to X's distance (run_dot), so that the kernels align both. Paired
// on one plan, 2 threads, against v left where it is: W 16 bytes off a line and x on one, x @ W.T
// 32x4096x4096 1.25x, 32x11008x4096 1.17x, 8x1024x1024 1.18x, 16x1000x1024 1.22x, 4x4096x4096
// 1.03x; x off and W on, 32x4096x4096 1.20x, 16x256x512 1.05x, A @ B 1024x4x1024 1.08x (AVX2
// 1.30x), 1024x8x512 1.09x. Below it the copy costs more (8x64x1024 0.92x, 16x128x512 0.94x).
constexpr int64_t kDotRealignMinOuts = 256;
constexpr int64_t kDotMaxRowsPairs = 16;
constexpr int64_t kDotWideMinCols = 128;
constexpr int64_t kDotMaxRowsWide[2] = {16, 32};  // [avx512]
// On cores that split 256-bit ops, x @ W.T (from kDotWideMinCols columns, K >= 8 M) takes the
// dot path instead of the packed path up to kDotMaxRowsOverPacked rows, and up to
// kDotMaxRowsOverPackedBigW where W is larger than L3 (instead_of_packed: asked again just before
// the packed path, so not instead of the direct paths, which won where they took the problem:
// 24x128x200 0.56x, 17x128x200 0.62x, 17x128x136 0.56x). The packed path packs W on every call
// by transposes (pack_b_panel_transposed: 14% of 32x1074x745's samples), and for few rows that
// costs more than the dot kernels' horizontal sums. AMD EPYC Zen 1, paired plans on 2 threads
// against the packed path: 17-32 rows, N 128-4096, K 256-2048 (75 shapes), 0.97-1.58x, median
// about 1.25x (17x128x1024 1.55x, 24x128x384 1.58x, 32x4096x4096 1.33x, 32x11008x4096 1.34x,
// 32x4096x11008 1.38x, 32x2048x2048 1.23x, 24x1000x1024 1.20x, 32x1074x745 1.02-1.05x; lowest
// 32x600x256 0.97-0.99x, 25x300x1000 0.98x, 32x256x256 1.00x). Past 32 rows mixed where W fits
// L3 (64x300x1000 0.89x, 64x512x600 0.91x, 64x1000x1024 1.03x, 48x1000x1024 1.06x, 56x160x700
// 1.23x); beyond it 1.06-1.19x (33x4096x1024 1.19x, 40x8192x1024 1.18x, 48x2048x2048 1.17x,
// 48x4096x4096 1.18x, 64x4096x4096 1.16x, 64x4096x2048 1.15x, 64x1536x1536 1.07x, 64x4096x512
// 1.06x; 96x4096x4096 1.11x, 128x4096x1024 1.01x, not taken).
// Zen cores that run 256-bit ops whole (CacheSizes::amd_zen): up to kDotMaxRowsOverPackedZen
// rows, whatever W's size. AMD EPYC Zen 3, the same pairing: 17x128x1024 1.42x, 24x128x384
// 1.63x, 24x256x256 1.85x, 24x600x256 1.47x, 17x1000x1000 1.44x, 20x4096x4096 1.29x,
// 17x4096x4096 1.22x, 24x4096x1024 1.18x, 24x4096x11008 1.16x, 20x128x256 1.16x, 20x512x512
// 1.09x, 24x1000x1024 1.07x, 24x1074x745 0.95x; past it mixed (26x600x256 1.41x, 28x512x512
// 1.41x, 31x256x256 1.66x, 32x128x1024 1.70x, 32x1000x1000 1.10x, 28x4096x4096 1.05x,
// 32x4096x4096 1.01x, 30x1000x1000 0.94x, 32x1074x745 0.92x, 32x256x256 0.84x, 32x600x256
// 0.81x, 32x4096x11008 0.81x, 48x4096x4096 0.90x, 64x4096x4096 0.83x).
constexpr int64_t kDotMaxRowsOverPacked = 32;
constexpr int64_t kDotMaxRowsOverPackedBigW = 64;
constexpr int64_t kDotMaxRowsOverPackedZen = 24;
// Columns of B (DotOver::a_rows). Against the direct, direct_rows and packed paths (Zen 3, kiln /
// OpenBLAS in separate processes, 2 threads): 2-4 columns 1.08-3.5x (4096x2x4096 1.79x -> 2.76x,
// 2048x2x512 1.53x -> 3.59x, 300x2x300 1.50x -> 5.21x, 2048x3x2048 1.48x -> 3.21x, 300x4x300
// 2.65x -> 2.85x, 8192x4x256 2.94x -> 4.07x; one thread 100x2x100 1.41x -> 3.11x, 64x4x64 1.68x ->
// 2.16x); 8 columns 0.29-0.59x in cache (2048x8x512, 300x8x300, 64x8x64, one thread 16x8x16),
// 1.41x from memory (4096x8x4096): the direct kernels' 8-wide rows take those.
constexpr int64_t kDotMaxCols = 4;
// AVX-512, four columns a pass over each block of A's rows (dot_kernel.cpp): 5-8 columns in two
// passes, where the direct kernels use 5-8 of a vector's 16 lanes. Paired plans, Intel Xeon, 2
// threads, against direct_rows: 1000x8x512 1.57x, 300x8x1024 1.59x, 1024x7x384 1.59x,
// 4096x5x256 1.67x, 500x5x500 1.50x, 768x6x1024 1.42x, 1500x6x200 1.42x, 256x6x1000 1.36x,
// 512x5x128 1.34x, 1000x6x128 1.30x, 2000x7x700 1.17x, 256x8x256 1.15x, 8192x8x128 1.11x,
// 300x7x300 1.07x. Outside the rule: 4096x8x64 0.78x, 64x8x256 0.81x, 16x5x1024 0.53x
// (direct_k), 100x5x1000 1.01x, 2048x8x2048 0.95x and 3000x8x1000 0.92x (A of 16 and 12 MiB,
// from memory). AVX2 (two columns a pass, 8 lanes) 0.79-1.14x (1000x8x512 0.79x, 1024x7x384
// 0.85x): not taken.
constexpr int64_t kDotMaxColsWide = 8;
constexpr int64_t kDotWideColsMinRows = 256;
constexpr int64_t kDotWideColsMinK = 128;
constexpr int64_t kDotWideColsMaxK = 1024;
constexpr int64_t kDotWideColsMaxABytes = int64_t{8} << 20;
constexpr int64_t kDotGroup = 8;  // the kernel's rows per group
// Two rows per pass: with several rows of A (x @ W.T), AVX-512 kernels take two rows
// per pass over X's rows (dot_kernel.cpp; an odd last row alone), so X's block is read from L2
// half as often and the first pass, from memory, does twice the FMAs. Intel Xeon, paired plans,
// 2 threads, against one row per pass: 2x4096x4096 1.39x (B rotated over 4 copies, from memory:
// 1.31x), 4x4096x4096 1.37x, 8x4096x4096 1.45x (1.42x), 8x4096x1024 1.29x (1.33x), 4x1024x1024
// 1.59x, 3x1024x1000 1.37x, 5x2048x2048 (from memory) 1.28x; one thread 1.32-1.81x (2x64x1024
// 1.81x). AVX2 has 16 vector registers: two rows per pass there (below).
// The same for A @ B with 2-4 columns (a_rows: two of B's columns per pass over A's rows; Intel
// Xeon, paired plans, against one column per pass, 2 threads): 4096x2x4096 1.34x, 2048x2x512
// 1.33x, 300x2x300 1.37x, 2048x3x2048 1.20x, 300x4x300 1.49x, 8192x4x256 1.24x, 1000x4x1000
// 1.49x, 4096x4x4096 1.40x; one thread 100x2x100 1.24x, 64x4x64 1.11x, 8x2x1000 1.19x, 300x3x300
// 1.37x, 4096x2x4096 1.34x.
// Four vectors per pass (three where only three are left): each element of X is loaded once for
// four dot products, half the loads of X that two pairs take, and where X's rows are not on
// 64-byte lines each of those loads is split across two. Intel Xeon (Emerald Rapids), paired
// plans, 2 threads, against pairs: A @ B 45x4x554 1.22x (A's rows on 64-byte lines, 45x4x560:
// 1.15x), 100x4x554 1.19x, 1000x4x300 1.15x, 8192x4x256 1.28x, 1000x4x1000 1.31x, 300x3x300
// 1.18x, 64x4x64 1.04x, 8x4x1000 1.48x; x @ W.T 3x1024x1024 1.36x, 4x1024x1024 1.21x,
// 4x4096x4096 1.25x, 3x4096x4096 1.28x, 4x4096x1024 1.38x, 4x16x4096 1.12x, 4x100x300 1.19x,
// 8x1024x1024 1.36x, 16x1000x1024 1.38x, 8x4096x4096 1.15x, 12x1000x211 1.06x, 9x21x211 1.02x;
// the one loss 7x33x64 0.98x. AVX2 (16 registers) takes two in groups of four rows of X (eight
// accumulators), against one vector per pass (KILN_ISA=avx2 on the same Xeon): A @ B 45x4x554
// 1.27x, 300x3x300 1.17x, 8x4x1000 1.22x, 1000x4x1000 1.51x, 64x4x64 1.09x, 2048x2x512 1.23x,
// 300x2x300 1.24x; x @ W.T 2x1024x1024 1.44x, 4x1024x1024 1.52x, 4x4096x4096 1.32x, 8x1024x1024
// 1.56x, 8x4096x1024 1.44x, 3x1024x200 1.17x, 8x64x4096 1.47x, 7x33x64 1.10x, 8x2000x300 1.17x.
constexpr int64_t kDotMaxVecs = 4;
constexpr int64_t kDotMaxVecsAvx2 = 2;
// Elements of X a task reads at least: below it, fewer tasks (a pool dispatch costs a few us).
constexpr int64_t kDotMinTaskElems = 16 * 1024;

int64_t mag(int64_t v) { return v < 0 ? -v : v; }

// The kernel addresses eight rows of X, outputs and residual elements with 32-bit displacements.
bool dot_fits(int64_t x_row_stride, int64_t out_stride, int64_t res_stride, int64_t K) {
  const int64_t widest = std::max({mag(x_row_stride), mag(out_stride), mag(res_stride)});
  return (kDotGroup - 1) * widest * 4 + K * 4 + 64 < (int64_t{1} << 31);
}

// The least K at which a dot kernel beats the paths that take the problem otherwise (direct,
// direct_rows, skinny): each of its outputs ends in a horizontal reduction, which over a short K
// is most of the work, where a direct kernel does one FMA per row and k-step for all of C's (up
// to four) columns at once; on few rows the dot path's fixed cost weighs too. dot_min_k: A's rows
// against N columns of B (DotOver::a_rows), or one column (b_rows with N = 1). Measured, paired
// plans on 2 threads, dot against the path taken without it (RESULTS.md, session of 2026-12-05
// morning), AVX-512 at 16 / 100 / 1000 / 10000 rows: N = 1 K = 4 0.37x, 0.61x, 0.81x, 0.79x, K = 8
// 0.63x, 1.15x, 1.39x, 1.33x; N = 2 K = 12 0.49-0.91x, K = 16 0.65x, 1.04x, 0.77x, 1.17x; N = 3
// K = 24 0.56-0.89x, K = 32 0.70x, 1.29x, 0.84x, 1.26x; N = 4 K = 32 0.59x, 0.91x, 0.62x, 1.00x,
// K = 48 0.73x, 1.13x, 1.00x, 1.23x. 16 rows take about twice the K (16x1x16 1.19x, 16x2x32 1.01x,
// 16x3x48 0.89x, 16x4x64 0.86x), eight or fewer four times (1x1x16 0.43x, 1x1x64 1.51x, 4x1x16
// 0.60x, 4x1x32 1.08x, 8x1x16 0.81x, 8x2x64 1.05x). AVX2 (direct rows half as wide): N = 1 K = 4
// 0.48x, 1.04x, 1.48x, 1.23x, from N = 2 as AVX-512. Where rows disagree the lower K is taken
// (1000x2x16 keeps the dot path at 0.77x; 1000x1x6 leaves it at 0.88x).
// With all 3-4 columns in one pass (AVX-512), 8-16 rows from K = 64 (paired plans against the
// direct kernels, 2 threads, Emerald Rapids): 8x4x64 1.05x, 8x4x80 1.16x, 8x4x96 1.26x,
// 10x4x64 1.04x, 12x4x64 1.15x, 16x4x64 1.20x, 16x4x80 1.37x, 8x3x64 1.16x, 8x3x96 1.36x,
// 16x3x48 1.18x; below it 8x4x48 0.86x, 12x4x48 0.96x, 16x4x48 1.02x, 8x3x32 0.73x, 16x3x32
// 0.87x, 12x3x40 0.84x. From 17 rows the table's K stands (1000x4x32 0.63x, 1000x3x24 0.53x).
// AVX2 (two columns a pass) with 8 rows and 2-4 columns: from K = 3 k (N = 2) or 2 k, not 4 k:
// 8x2x48 1.24x, 8x2x56 1.39x, 8x3x64 1.09x, 8x3x96 1.24x, 8x4x96 1.06x (8x2x32 0.99x, 8x3x32
// 0.78x, 8x4x64 0.95x); 9-15 rows keep 2 k (at k: 9x3x40 0.89x, 10x3x32 0.80x, 11x4x50 0.76x,
// 12x4x48 0.89x, though 16x4x48 1.12x).
constexpr int64_t kDotMinK[2][kDotMaxCols] = {{4, 16, 32, 48}, {8, 16, 32, 48}};  // [avx512][N-1]
constexpr int64_t kDotMinKFewRowsOnePass = 64;
int64_t dot_min_k(int64_t M, int64_t N, Isa isa) {
  const int64_t k = kDotMinK[isa == Isa::avx512][N - 1];
  if (isa == Isa::avx512 && N >= 3 && M <= 16) return kDotMinKFewRowsOnePass;
  if (isa != Isa::avx512 && N >= 2 && M <= 8) return (N == 2 ? 3 : 2) * k;
  return M <= 8 ? 4 * k : M <= 16 ? 2 * k : k;
}
// The same for x @ W.T over M rows of A and several columns (b_rows; the other path a direct
// kernel over B copied row-major): AVX-512, 1000 columns: M = 1 from K = 2 (1.15x), M = 2 from 4
// (1.17x), M = 3 K = 8 1.05x, M = 4 K = 8 0.88x and K = 12 1.34x, M = 8 K = 3 0.31x, K = 12
// 0.77x, K = 16 0.98x, K = 32 1.44x; AVX2 (one row of A a pass) from about K = M: 8 rows K = 3
// 0.58x, K = 8 1.00x, 6 rows K = 4 0.80x, 4 rows K = 4 1.29x.
// Past 8 rows (AVX2 too, from kDotWideMinCols columns) from K = 8 M.
// Cores that split 256-bit ops (CacheSizes::split_256): from K = 10 M; 2 and 3 rows from 6 M,
// one row from any K. AMD EPYC Zen 1 (2 vCPUs), paired plans on 2 threads, dot against direct
// (B copied), x @ W.T, with AVX2 edges by xmm moves (26e2fee; KILN_CACHE=off): 5x462x11 0.68x,
// 4x1000x8 0.55x, 4x1000x20 0.92x, 4x1000x32 0.96x, 8x1000x16 0.37x, 8x1000x32 0.51x, 8x64x40
// 0.77x, 2x1000x4 0.97x, 2x1000x8 0.88x; the dot path wins from 2x1000x12 1.49x, 2x1000x16
// 1.16x, 2x64x16 1.11x, 3x1000x12 1.03x, 3x1000x24 1.11x, and for one row at every K
// (1x1000x2 1.56x, 1x1000x4 1.80x, 1x64x4 1.52x). Before those edges (vmaskmovps in both
// kernels): 2x1000x24 1.22x, 4x1000x40 1.56x, 6x2000x64 1.14x, 8x1000x80 1.18x, 8x64x96 1.09x,
// 8x1000x64 0.98x, 5x462x66 0.79x, 5x462x88 1.52x.
// Zen cores that run 256-bit ops whole (CacheSizes::amd_zen): from K = 4 M, and one row from
// K = kZenDotMinK. AMD EPYC Zen 3 (2 vCPUs), the same pairing, dot against direct (B copied by
// the 8x8 transposes and xmm moves of c25620f and 3393a5b; K = M was measured on Intel before
// them): 2x1000x4 0.45x, 4x1000x8 0.63x, 8x1000x16 0.46x, 5x462x11 0.65-0.75x (A transposed
// too 0.75x), 6x1000x18 0.68x, 3x1000x9 0.85x, 1x1000x4 0.70-0.79x, 1x1000x5 0.89x; at the bound
// 1x1000x6 0.98x, 2x1000x8 1.10-1.30x, 3x1000x12 0.99-1.01x, 4x1000x16 0.75-0.93x
// (4x4096x16 2.2-2.6x), 6x1000x24 0.85-0.87x, 8x1000x32 0.74-0.78x (8x4096x32 1.10-1.14x); past it
// 1x1000x8 2.08x, 2x1000x10 1.52x, 3x1000x18 1.39x, 4x1000x24 1.27x, 6x1000x36 1.59x,
// 8x1000x40 1.37x.
constexpr int64_t kZenDotMinK = 6;
int64_t dot_min_k_b_rows(int64_t M, Isa isa, const CacheSizes& caches) {
  if (M > kDotMaxRows) return 8 * M;
  if (isa == Isa::avx512) return M < 4 ? 2 * M : 4 * M;
  if (caches.split_256) return M == 1 ? M : M <= 3 ? 6 * M : 10 * M;
  return caches.amd_zen ? std::max(kZenDotMinK, 4 * M) : M;
}
int64_t dot_max_rows(int64_t N, Isa isa) {
  if (N >= kDotWideMinCols) return kDotMaxRowsWide[isa == Isa::avx512];
  return isa == Isa::avx512 && N > 1 ? kDotMaxRowsPairs : kDotMaxRows;
}

}  // namespace

DotOver dot_path_for(const GemmProblem& p, Isa isa, bool prepacked_b, const CacheSizes& caches,
                     bool instead_of_packed) {
  // A symbolic N or K is baked into every dot kernel; a symbolic M only into a_rows' (its
  // outputs), while b_rows' kernels take M's rows one to four at a time (dot_vecs and the rest,
  // for the blocks and the last block of either blocking: at most sixteen per N and K).
  if (prepacked_b || p.K < 1 || p.M < 1 || p.N < 1 || p.dynamic_nk) return DotOver::none;
  const int64_t ld_res = p.epi.residual ? p.epi.ld_residual : 0;
  // A's rows against up to kDotMaxCols columns of B (outputs down C's columns, ldc apart).
  const bool a_rows_cols =
      p.N <= kDotMaxCols || (isa == Isa::avx512 && p.N <= kDotMaxColsWide &&
                             p.M >= kDotWideColsMinRows && p.K >= kDotWideColsMinK &&
                             p.K <= kDotWideColsMaxK && p.M * p.K * 4 <= kDotWideColsMaxABytes);
  if (a_rows_cols && !p.dynamic_m && p.a.col_stride == 1 && (p.N == 1 || p.M >= kDotGroup) &&
      p.K >= dot_min_k(p.M, std::min(p.N, kDotMaxCols), isa) &&
      dot_fits(p.M == 1 ? 0 : p.a.row_stride, p.ldc, ld_res, p.K))
    return DotOver::a_rows;
  // Up to dot_max_rows rows of A against B's rows along K (not B's columns: the stream path's).
  int64_t max_rows = dot_max_rows(p.N, isa);
  if (instead_of_packed && isa == Isa::avx2 && p.N >= kDotWideMinCols) {
    if (caches.split_256)
      max_rows =
          p.N * p.K * 4 > caches.l3_bytes ? kDotMaxRowsOverPackedBigW : kDotMaxRowsOverPacked;
    else if (caches.amd_zen)
      max_rows = kDotMaxRowsOverPackedZen;
  }
  if (p.M <= max_rows && p.b.row_stride == 1 && (p.N == 1 || p.b.col_stride != 1) &&
      p.K >= (p.N == 1 ? dot_min_k(p.M, 1, isa) : dot_min_k_b_rows(p.M, isa, caches)) &&
      dot_fits(p.N == 1 ? 0 : p.b.col_stride, 1, 1, p.K))
    return DotOver::b_rows;
  return DotOver::none;
}

void GemmPlan::Impl::plan_dot(const GemmProblem& p, DotOver over, const KernelDesc& base,
                              int threads, const CacheSizes& caches) {
  path = Path::dot;
  dot_over = over;
  const int64_t nout = over == DotOver::a_rows ? p.M : p.N;
  const int64_t vrows = over == DotOver::a_rows ? p.N : p.M;
  KernelDesc d = base;
  d.kind = KernelKind::dot;
  d.rows = 1;
  d.K = p.K;
  d.a_cs = 1;
  // One output: X's row stride is never used (one kernel for any).
  d.b_rs = nout == 1 ? 0 : over == DotOver::a_rows ? p.a.row_stride : p.b.col_stride;
  // a_rows: consecutive outputs (and residual elements) go down a column of C, a row apart.
  d.ldc = over == DotOver::a_rows && nout > 1 ? p.ldc : 1;
  d.ld_res = !base.has_residual ? 0 : over == DotOver::a_rows && nout > 1 ? p.epi.ld_residual : 1;
  d.bias_bcast = over == DotOver::a_rows && (base.has_bias || base.has_col_scale);
  // X's loads aligned at run time, where its rows all sit the same distance off a vector's
  // boundary.
  const bool avx512 = isa == Isa::avx512;
  d.k_align = p.K >= kDotAlignMinK[avx512] && (nout == 1 || d.b_rs % (avx512 ? 16 : 8) == 0);
  // Several vectors per pass over X: rows of A (b_rows) or columns of B (a_rows).
  // Their distance is an immediate: A's row stride or B's column stride, or K where run_dot
  // copies them (their elements not unit-stride along K).
  const int64_t a_rs = over == DotOver::a_rows ? (p.b.row_stride == 1 ? p.b.col_stride : p.K)
                       : p.a.col_stride == 1   ? p.a.row_stride
                                               : p.K;
  // Vectors per pass: up to 4 on AVX-512 and 2 on AVX2 (dot_kernel.cpp), where the kernel's
  // reach fits.
  dot_vecs = 1;
  const int64_t max_vecs = isa == Isa::avx512 ? kDotMaxVecs : kDotMaxVecsAvx2;
  for (int v = int(std::min<int64_t>(vrows, max_vecs)); v > 1 && dot_vecs == 1; --v) {
    const int64_t reach = p.K + (v - 1) * mag(a_rs);
    if (over == DotOver::b_rows ? dot_fits(p.N == 1 ? 0 : p.b.col_stride, 1, 1, reach)
                                : dot_fits(nout == 1 ? 0 : p.a.row_stride, d.ldc, d.ld_res, reach))
      dot_vecs = v;
  }
  const int64_t passes = ceil_div(vrows, dot_vecs);
  const int64_t tasks = std::clamp<int64_t>(nout * p.K / kDotMinTaskElems, 1, std::max(1, threads));
  chunk = round_up(ceil_div(nout, tasks), kDotGroup);
  // Several passes: X walked in blocks that stay in a cache while every pass reads them, so X
  // comes from memory (or L2) once. In L1 where a group of its rows fits in half of it, else in
  // half of L2. L1 blocks against L2 ones (paired plans, 2 threads, Intel Xeon), AVX-512 / AVX2:
  // 45x4x554 1.22x / 1.37x, 1000x4x300 1.23x / 1.37x, 8192x4x256 1.16x / 1.28x, 300x3x300 1.23x
  // / 1.27x, x @ W.T 8x2000x300 2.33x / 2.70x, 8x20000x64 1.33x / 1.59x, 3x1024x200 1.23x /
  // 1.25x, 4x4096x256 1.04x / 1.20x; one pass (AVX-512 2048x2x512) 0.92x, so not there.
  dot_block = chunk;
  if (passes > 1) {
    const int64_t row_bytes = p.K * 4;
    const int64_t l1_rows = caches.l1d_ways * caches.l1d_way_bytes / 2 / row_bytes;
    const int64_t fit = l1_rows >= kDotGroup ? l1_rows : caches.l2_bytes / 2 / row_bytes;
    dot_block = std::min(chunk, std::max(kDotGroup, fit / kDotGroup * kDotGroup));
    chunk = round_up(chunk, dot_block);
  }
  nchunks = ceil_div(nout, chunk);
  const int64_t nblocks = ceil_div(nout, dot_block);
  for (int last = 0; last < 2; ++last) {
    if (!last && nblocks == 1) continue;
    d.cols = last ? nout - (nblocks - 1) * dot_block : dot_block;
    // The passes' kernel, and one for the vectors left after them (vrows % dot_vecs).
    for (int rest = 0; rest < 2; ++rest) {
      const int64_t vecs = rest ? vrows % dot_vecs : dot_vecs;
      if (vecs == 0) continue;
      KernelDesc dv = d;
      dv.rows = vecs;
      dv.a_rs = vecs > 1 ? a_rs : 0;
      (rest ? dot_rest : dot)[last] = use(dv);
    }
  }
}

void GemmPlan::Impl::run_dot(const GemmProblem& p, ThreadPool* pool) const {
  const bool over_a = dot_over == DotOver::a_rows;
  // v: A's rows (b_rows) or B's columns (a_rows), unit stride along K (copied where not).
  const int64_t vrows = over_a ? N : M;
  const float* v0 = over_a ? p.b.data : p.a.data;
  const int64_t v_cs = over_a ? p.b.row_stride : p.a.col_stride;
  const int64_t v_rs0 = over_a ? p.b.col_stride : p.a.row_stride;
  const float* x = over_a ? p.a.data : p.b.data;
  const int64_t x_rs = over_a ? p.a.row_stride : p.b.col_stride;
  const int64_t nout = over_a ? M : N, nblocks = ceil_div(nout, dot_block);
  // Each thread copies v for itself where it copies it (as chunk_b does B for direct_rows): one
  // copy by the calling thread, read by the other, made the next call's copy wait for its lines
  // to come back (48x4x1024 on 2 threads: 9.6 us a call, 5.0 us with a copy on each thread).
  // k_align: the kernels align X's loads where v sits as far off a line as X. Where it does not
  // (v copied, or another allocation), v is copied to that distance, its rows as far apart as the
  // kernels take them (KernelDesc::a_rs: v_rs, or K where copied anyway).
  const bool k_align = dot[1]->desc.k_align != 0;
  const auto line_offset = [](const float* f) { return int64_t(uintptr_t(f) / 4 % 16); };
  const bool realign =
      k_align && (v_cs != 1 || line_offset(v0) != line_offset(x)) && nout >= kDotRealignMinOuts;
  parallel(pool, nchunks, [&](int64_t begin, int64_t end) {
    const float* v = v0;
    int64_t v_rs = v_rs0;
    if (v_cs != 1 || realign) {
      const int64_t rs = v_cs != 1 ? K : v_rs0;
      const int64_t shift = realign ? line_offset(x) : 0;
      float* copy =
          thread_scratch(ScratchSlot::a_block, size_t(shift + (vrows - 1) * std::abs(rs) + K));
      // A negative row stride (A's rows reversed) keeps its first row last in the copy.
      float* first = copy + shift + (rs < 0 ? (vrows - 1) * -rs : 0);
      if (v_cs != 1)
        copy_b_rowmajor(MatrixRef{v, v_rs, v_cs}, vrows, K, first);
      else
        for (int64_t i = 0; i < vrows; ++i)
          std::memcpy(first + i * rs, v + i * v_rs, size_t(K) * sizeof(float));
      v = first;
      v_rs = rs;
    }
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t j0 = c * chunk; j0 < std::min(nout, (c + 1) * chunk); j0 += dot_block) {
        const int last = j0 / dot_block == nblocks - 1;
        for (int64_t i = 0; i < vrows; ++i) {
          // a_rows: outputs j0.. down C's column i (bias[i] for all); b_rows: along C's row i. A
          // kernel's further vectors write C's next columns (a_rows) or rows, their residuals
          // likewise.
          const int64_t vecs = std::min<int64_t>(dot_vecs, vrows - i);
          const int64_t out = over_a ? j0 * p.ldc + i : i * p.ldc + j0;
          const int64_t ldr = p.epi.ld_residual;
          const int64_t next_out = over_a ? 1 : p.ldc, next_res = over_a ? 1 : ldr;
          KernelArgs args{
              nullptr,
              p.epi.residual ? p.epi.residual + (over_a ? j0 * ldr + i : i * ldr + j0) : nullptr,
              0,
              vecs > 1 ? next_out * 4 : 0,
              vecs > 1 ? next_res * 4 : 0,
              p.epi.scale};
          set_columns(args, p.epi, over_a ? i : j0);
          (vecs == dot_vecs ? dot : dot_rest)[last]->fn(&args, v + i * v_rs, x + j0 * x_rs,
                                                        p.c + out);
          i += vecs - 1;
        }
      }
    }
  });
}

}  // namespace kiln::x86
