// The skinny path: a few rows of C (M <= 16, AVX-512: 32) with B's columns unit-stride, as direct
// kernels over chunks of N in parallel, in K blocks (short ones where B's rows are a page apart).
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/generators.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::x86 {

namespace {

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
// kSkinnyDynamicRows per N and K where B is within a tenth of L2 (kSkinnyDynamicSmallBShare: past
// those rows the direct kernels' row blocks take such a B, their kernels bounded for every M);
// with a larger B they take the rows they take with M exact (at most 16, AVX-512 32, kernels per
// N and K, made as each M first comes), which packed A and B on every call before: paired plans,
// 2 threads, M symbolic against exact, 12x512x512 0.50x -> 1.00x, 16x512x512 0.50x -> 1.01x,
// 9x1000x300 0.36x -> 1.00x, 32x512x512 0.84x -> 1.01x.
constexpr int64_t kSkinnyDynamicRows = 8;
constexpr int64_t kSkinnyDynamicSmallBShare = 10;
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

}  // namespace

bool b_rows_page_apart(const GemmProblem& p) {
  return std::abs(p.b.row_stride) * 4 >= kSkinnyMaxRowBytes;
}

int64_t skinny_chunk_cols(const GemmProblem& p, int64_t T, Isa isa) {
  const DirectTiling tiling = direct_tiling(isa == Isa::avx512, p.M, p.N);
  const int64_t tile_w = int64_t(tiling.vectors) * isa_lanes(isa);
  // One chunk per thread, each at least a column tile wide. Chunks of at least 4 tiles before
  // left C's narrow problems on one thread: Intel Xeon, paired plans, 2 threads, against that:
  // 32x256x128 1.65x, 12x128x300 1.39x, 32x128x128 1.39x, 32x192x192 1.38x, 24x128x128 1.33x,
  // 32x96x128 1.21x, 32x256x64 1.14x, 32x160x160 1.13x; KILN_ISA=avx2 16x64x512 1.69x, 12x48x700
  // 1.32x, 16x40x1000 1.29x; shapes whose chunks did not change 0.98-1.04x. Under
  // kSmallSplitMinFmas (a hand-over's cost) still 4 tiles.
  const bool split_pays = p.M * ceil_div(p.N, isa_lanes(isa)) * p.K >= kSmallSplitMinFmas;
  const int64_t min_width = split_pays ? tile_w : 4 * tile_w;
  const int64_t want = std::max<int64_t>(1, std::min<int64_t>(T, ceil_div(p.N, min_width)));
  return round_up(ceil_div(p.N, want), tile_w);
}

bool GemmPlan::Impl::plan_skinny(const GemmProblem& p, const KernelDesc& base, int64_t T,
                                 bool prepacked_b, bool direct_k_can, const CacheSizes& caches) {
  const bool small_b = p.K * p.N * 4 <= caches.l2_bytes / kSkinnyDynamicSmallBShare;
  const int64_t skinny_rows = p.dynamic_m && small_b ? kSkinnyDynamicRows
                              : isa == Isa::avx2     ? kSkinnyRows
                                                     : kSkinnyRowsAvx512;
  const bool page_apart = b_rows_page_apart(p);
  if (prepacked_b || p.M > skinny_rows || p.b.col_stride != 1 || p.dynamic_nk || direct_k_can ||
      (page_apart && p.M > kSkinnyPageApartRows) || !direct_disp_fits(p, p.M, p.N, p.b.row_stride))
    return false;
  path = Path::skinny;
  const DirectTiling tiling = direct_tiling(isa == Isa::avx512, p.M, p.N);
  chunk = skinny_chunk_cols(p, T, isa);
  nchunks = ceil_div(p.N, chunk);
  const bool b_out_of_l2 = p.K * chunk * 4 > caches.l2_bytes / 4;
  const bool cols_outer = tiling.rows_max < p.M;
  nkb = std::max<int64_t>(1, ceil_div(p.K, page_apart                  ? kSkinnyPageApartKBlock
                                           : cols_outer && b_out_of_l2 ? kSkinnyColsOuterKBlock
                                                                       : kSkinnyKBlock));
  kb = std::max<int64_t>(1, ceil_div(p.K, nkb));  // K = 0: one empty block
  nkb = std::max<int64_t>(1, ceil_div(p.K, kb));
  const int64_t last_chunk = p.N - (nchunks - 1) * chunk;
  const int64_t last_kb = p.K - (nkb - 1) * kb;
  const bool prefetch = std::abs(p.b.row_stride) * 4 >= kSkinnyPrefetchMinRowBytes && b_out_of_l2;
  for (int lc = 0; lc < 2; ++lc) {
    if (lc == 0 && nchunks == 1) continue;
    for (int kind = 0; kind < 4; ++kind) {  // first, middle, last, only
      if ((nkb == 1) != (kind == 3) || (kind == 1 && nkb < 3)) continue;
      KernelDesc d = direct_desc(base, p, p.M, lc ? last_chunk : chunk, kind >= 2 ? last_kb : kb,
                                 p.b.row_stride);
      d.accumulate = kind == 1 || kind == 2;
      d.last = kind >= 2;
      d.b_prefetch = prefetch ? kSkinnyPrefetchRows : 0;
      d.cols_outer = cols_outer && direct_tiling(isa == Isa::avx512, p.M, d.cols).rows_max < p.M;
      if (!d.last)
        d.has_bias = d.has_scale = d.act = d.has_residual = d.ld_res = d.has_col_scale = 0;
      skinny[lc][kind] = use(d);
    }
  }
  return true;
}

void GemmPlan::Impl::run_skinny(const GemmProblem& p, ThreadPool* pool) const {
  parallel(pool, nchunks, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t j0 = c * chunk;
      const int lc = c == nchunks - 1;
      for (int64_t b = 0; b < nkb; ++b) {
        const int kind = nkb == 1 ? 3 : b == 0 ? 0 : b == nkb - 1 ? 2 : 1;
        const int64_t k0 = b * kb;
        KernelArgs args{nullptr,    p.epi.residual ? p.epi.residual + j0 : nullptr, 0, 0, 0,
                        p.epi.scale};
        set_columns(args, p.epi, j0);
        skinny[lc][kind]->fn(&args, p.a.data + k0 * p.a.col_stride,
                             p.b.data + k0 * p.b.row_stride + j0, p.c + j0);
      }
    }
  });
}

}  // namespace kiln::x86
