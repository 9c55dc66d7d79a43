// x.T @ w with a few columns of C (Path::transposed): a weight gradient's shape, A stored [K, M]
// (its columns runs), C of 2-8 columns. Every other path gives C's few columns one vector per
// row, most of its lanes idle (4 columns: a quarter of each FMA used). Its transpose
// C^T = B^T @ A^T has 2-8 rows and M columns, A's rows now B's unit-stride rows: the plan runs it
// (skinny, direct or direct_rows, whatever suits it) into a scratch of N x M, copies that into C
// by 8x8 transposes, and applies the epilogue, if any, by a direct kernel over all of C with no
// K steps (C = epilogue(C)). As the K split's, that last step reads the residual after C is
// written: the residual must not alias C (gemm.h: GemmProblem).
// On Zen cores with AVX2, also a tall C of up to kTransposedWideMaxCols columns (wide_pays):
// there the packed path's cost is packing A, whose K x MC block it reads in runs of MC floats
// a row of K apart, each element then feeding only N / NR column panels.
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/pack.h"

#include <algorithm>

namespace kiln::x86 {

namespace {

// Where it pays. Paired plans, Intel Xeon, 2 threads, against the plans before (direct,
// direct_rows, direct_k or packed, one vector of C's columns a row), AVX-512: 768x2x512 4.50x,
// 2048x2x2048 3.41x, 4096x2x64 3.36x, 64x4x4096 3.27x, 4096x8x2048 2.65x, 103x4x2356 2.52x,
// 2000x4x128 2.47x, 100x4x32 2.31x, 256x3x8192 2.03x, 1024x4x1024 1.96x, 768x4x128 1.94x,
// 16x8x1024 1.80x, 64x8x64 1.74x, 1000x4x64 1.61x, 1000x8x256 1.57x, 100x8x64 1.55x, 300x7x300
// 1.46x, 500x3x32 1.40x, 32x8x32 1.35x, 1000x2x16 1.31x, 1000x8x128 1.26x, 24x3x24 1.23x,
// 9x2x100 1.19x, 200x8x200 1.05x; lost 1000x8x64 0.83x, 1000x8x32 0.89x, 1000x6x64 0.94x (the
// transposes, on the calling thread, weigh against a short K) and 16x4x16 0.88x (58 ns).
// KILN_ISA=avx2 (8 lanes, so half as many columns): 768x2x512 5.72x, 4096x8x2048 3.39x,
// 103x4x2356 1.81x, 768x4x128 1.65x, 24x3x24 1.33x, 1000x2x16 1.15x, 500x3x32 1.04x; lost
// 1000x4x64 0.91x, and from 5 columns 0.72-0.94x (1000x8x64, 1000x6x64, 100x8x64, 32x8x32,
// 200x8x200, 300x7x300, 1000x8x128). So: 2 columns (one is column_as_row's, stream_path.cpp)
// up to half a vector; up to a quarter of a vector from kTransposedMinK, more from
// kTransposedLongK or up to kTransposedFewRows rows; M x K at least kTransposedMinWork.
// On cores that split 256-bit ops (CacheSizes::split_256; AVX2) the other paths' half-empty
// vectors cost more, and since C's copies and B's short runs move by xmm moves (pack.cpp) the
// transposes cost less: up to 4 columns from kSplitTransposedMinK, 5-8 from
// kSplitTransposedWideMinK (M past a whole vector). AMD EPYC Zen 1, 2 vCPUs, paired plans on 2
// threads against the plans the rule above makes, KILN_CACHE=off: 1000x2x8 1.86x, 1000x3x8
// 1.51x, 500x3x8 1.50x, 2000x4x16 1.35x, 1000x4x32 1.49x, 1000x4x64 1.93x, 1000x3x64 2.32x;
// 1000x5x64 1.80x, 1000x5x100 2.71x, 100x5x64 2.00x, 1000x6x64 1.55x, 200x6x100 1.43x, 300x7x300
// 1.99x, 2000x8x64 1.81x, 1000x8x64 1.10x, 1000x8x128 1.96x, 1000x8x256 2.35x, 300x8x300 1.84x,
// 400x8x200 1.82x, 64x8x64 1.11x, 150x8x64 1.07x, 200x8x300 1.07x, 100x8x64 1.05x, but 250x8x200
// 0.98x and 200x8x200 0.93-0.95x. Shorter K: 1000x2x4 1.31x, 300x3x6 1.26x, 1000x4x4 0.98x;
// 500x7x50 1.06x, 1000x8x32 0.96x, 1000x6x16 0.77x.
// Zen cores that run 256-bit ops whole (CacheSizes::amd_zen) take the same rule. AMD EPYC Zen 3,
// 2 vCPUs, the same pairing against the other rule: 1000x2x8 2.07x, 1000x3x8 1.79x, 500x3x8
// 1.76x, 2000x4x16 1.27x, 1000x4x32 1.27x, 1000x4x64 1.74x, 1000x3x64 2.01x, 1000x5x64 1.49x,
// 1000x5x100 3.13-3.37x, 100x5x64 1.75x, 1000x6x64 1.35x, 200x6x100 1.25x, 300x7x300 2.52x,
// 2000x8x64 1.99x, 1000x8x128 2.32x, 1000x8x256 2.66x, 300x8x300 2.55x, 64x8x64 1.22x; lost
// 1000x8x64 0.93-0.95x, 200x8x200 0.89x, 200x8x300 0.87x; level 250x8x200, 1000x8x32,
// 1000x6x16, 500x7x50, 150x8x64, 100x8x64.
constexpr int64_t kSplitTransposedMinK = 8;
constexpr int64_t kSplitTransposedWideMinK = 64;
constexpr int64_t kTransposedMinCols = 2;
constexpr int64_t kTransposedMinK = 16;
constexpr int64_t kTransposedLongK = 128;
constexpr int64_t kTransposedFewRows = 128;
constexpr int64_t kTransposedMinWork = 512;
// wide_pays: on an AMD EPYC Zen 3 (AVX2, 2 vCPUs; the packed path's A blocks, MC rows of 6-row
// panels, packed from runs of MC floats 2-16 KiB apart) 29-36% of 512x32x512's profile was
// pack_a_block, and that plan ran at 68 GFLOP/s where 512x32x512 with A row-major ran at 162.
// The transposed problem packs B^T (N x K, small) as its A and A^T's rows, whole runs of M, as
// its B. Paired plans, 2 threads (1), against the packed plan, from K kTransposedWideMinK:
// 512x32x512 1.08x (1.25x), 2048x32x512 1.27x, 1024x32x8192 1.43x, 4096x64x4096 1.26x,
// 512x16x512 1.12x, 1000x16x1000 1.33x (1.42x), 1000x24x1000 1.19x, 700x20x700 1.30x (1.19x),
// 2000x64x2000 1.07x (1.16x), 1000x64x1000 1.01x (0.97x); B transposed too, 512x32x512 1.09x,
// 1000x16x1000 1.54x, 4096x64x4096 1.35x; against the packed plan for a B packed once (a
// constant weight; prepacked_b_pays is false here, so the weight is read on every call),
// 512x32x512 1.13x, 2048x32x512 1.20x, 1000x16x1000 1.48x, 4096x64x4096 1.23x, 1000x32x256
// 1.06x, 1000x64x1000 1.02x. Up to kTransposedWideShortKMaxCols columns from K
// kTransposedWideShortK: 1000x32x256 1.09-1.13x, 2000x32x256 1.21x, 4096x32x256 1.12x,
// 1000x16x256 1.47x, 1000x32x300 0.98-1.13x, 1000x32x384 1.07x. Where it stops: fewer rows than
// 16 a column (512x64x512 1.09x, 512x48x512 1.03x, 384x32x1000 0.98x, 256x32x1000 1.00x,
// 256x64x256 0.90x, and where the plan before was direct, 128x32x4096 0.94x, 64x32x4096 0.94x,
// 100x40x100 0.87x); a shorter K (4096x64x64 0.81x, 4096x32x128 0.83-0.94x, 4096x32x192 0.84x,
// 1000x32x128 0.87x; 1000x16x128 1.20x and 1000x24x128 1.16x left out); more than 32 columns
// at K under 512 (4096x64x256 0.92x, 1000x64x256 0.99x, 1000x64x384 1.03x, 2000x48x192 0.88x;
// 1000x48x300 1.09x and 3000x40x200 1.05x left out); past 64 columns (300x96x300 0.95x,
// 1000x80x1000 0.99x, 1000x128x1000 1.02x, 2048x256x2048 0.99x). The scratch C^T is bounded
// (kTransposedWideMaxScratch floats, 8 MiB); a taller C keeps the packed plan. Not measured on
// Intel's cores or on cores that split 256-bit ops: neither takes it.
// On a Zen 5 (CacheSizes::amd_zen5) AVX-512 takes it too (17-64 columns there), where direct_k
// does not fit (k_split.cpp, direct_k_fits: a C of at most 32 Ki floats). Paired plans, 2
// threads, against the plans before (packed): 4096x64x4096 1.44-1.47x (B transposed too 1.40x),
// 2048x64x2048 1.45x, 1024x64x8192 1.41x, 8192x64x1024 1.40x, 2000x64x2000 1.65x, 1024x64x1024
// 1.04x, 2048x64x512 1.00x, 4096x48x1024 1.62x, 3000x40x600 1.76x, 1100x36x700 1.31x,
// 1000x40x1000 1.31x, 1000x48x1000 1.09x, 4096x32x4096 1.73x, 2048x32x2048 1.70x, 4096x24x4096
// 1.98x, 2000x17x1000 2.21x. Against direct_k, where it fits: 1024x32x8192 0.63-0.78x,
// 512x32x512 0.78x, 1000x32x256 0.85x, 512x64x512 1.00x, 1000x20x1000 1.13x: not taken there.
constexpr int64_t kTransposedWideMaxCols = 64;
constexpr int64_t kTransposedWideMinRowsPerCol = 16;
constexpr int64_t kTransposedWideMinK = 512;
constexpr int64_t kTransposedWideShortKMaxCols = 32;
constexpr int64_t kTransposedWideShortK = 256;
constexpr int64_t kTransposedWideMaxScratch = int64_t(2) << 20;

// The transposed problem: C^T (N x M) = B^T (N x K) @ A^T (K x M), into s (rows M apart).
GemmProblem transposed_of(const GemmProblem& p, float* s) {
  GemmProblem t;
  t.M = p.N, t.N = p.M, t.K = p.K;
  t.a = MatrixRef{p.b.data, p.b.col_stride, p.b.row_stride};
  t.b = MatrixRef{p.a.data, p.a.col_stride, p.a.row_stride};
  t.c = s;
  t.ldc = p.M;
  return t;
}

// Whether x.T @ w with up to a vector of C's columns pays as its transpose (the rules above).
bool narrow_pays(const GemmProblem& p, Isa isa, const CacheSizes& caches) {
  const int64_t lanes = isa_lanes(isa);
  // (M past half a vector, and past a whole one where N is past half (split-256 cores, below):
  // the transposed problem, its A now B's and its M our N, does not come back here.)
  if (p.N < kTransposedMinCols || p.N > lanes || 2 * p.M <= lanes || p.M * p.K < kTransposedMinWork)
    return false;
  if ((caches.split_256 || caches.amd_zen) && isa == Isa::avx2) {
    // Past half a vector of columns, M past a whole vector: the transposed problem (M' = N) must
    // not come back here.
    const bool wide = 2 * p.N > lanes;
    return p.K >= (wide ? kSplitTransposedWideMinK : kSplitTransposedMinK) &&
           !(wide && p.M <= lanes);
  }
  if (2 * p.N > lanes || p.K < kTransposedMinK) return false;
  return !(4 * p.N > lanes && p.K < kTransposedLongK && p.M > kTransposedFewRows);
}

// ... and with more, up to kTransposedWideMaxCols (the rule above it). M is at least 16 N: the
// transposed problem, N' = M, does not come back here.
bool wide_pays(const GemmProblem& p, Isa isa, int threads, const CacheSizes& caches) {
  const bool zen_avx2 = caches.amd_zen && !caches.split_256 && isa == Isa::avx2;
  const bool zen5_avx512 = caches.amd_zen5 && isa == Isa::avx512 &&
                           !direct_k_fits(p.M, p.N, p.K, std::max(1, threads), isa);
  return (zen_avx2 || zen5_avx512) && p.N > isa_lanes(isa) && p.N <= kTransposedWideMaxCols &&
         p.M >= kTransposedWideMinRowsPerCol * p.N &&
         p.K >=
             (p.N <= kTransposedWideShortKMaxCols ? kTransposedWideShortK : kTransposedWideMinK) &&
         p.M * p.N <= kTransposedWideMaxScratch;
}

}  // namespace

bool GemmPlan::Impl::plan_transposed(const GemmProblem& p, const KernelDesc& base, int threads,
                                     const CacheSizes& caches) {
  if (p.dynamic_m || p.dynamic_nk || p.a.row_stride != 1 || p.a.col_stride == 1 ||
      !(narrow_pays(p, isa, caches) || wide_pays(p, isa, threads, caches)))
    return false;
  // The epilogue's kernel reads C at its own strides, with no K steps (A's and B's are unread).
  if (base.has_epilogue() && !direct_disp_fits(p, p.M, p.N, p.N)) return false;
  path = Path::transposed;
  transposed_plan = GemmPlan::make(transposed_of(p, nullptr), isa, threads, false, caches);
  for (const Kernel* k : transposed_plan->impl_->used)
    if (std::find(used.begin(), used.end(), k) == used.end()) used.push_back(k);
  if (base.has_epilogue()) {
    KernelDesc d = direct_desc(base, p, p.M, p.N, 0, p.N);
    d.accumulate = 1;
    d.last = 1;
    transposed_epilogue = use(d);
  }
  return true;
}

void GemmPlan::Impl::run_transposed(const GemmProblem& p, ThreadPool* pool) const {
  float* s = thread_scratch(ScratchSlot::c_transposed, size_t(p.N * p.M));
  transposed_plan->impl_->run(transposed_of(p, s), pool, nullptr);
  transpose_into(s, p.M, p.N, p.M, p.c, p.ldc);
  if (!transposed_epilogue) return;
  KernelArgs args{nullptr, p.epi.residual, 0, 0, 0, p.epi.scale};
  set_columns(args, p.epi, 0);
  transposed_epilogue->fn(&args, p.a.data, p.b.data, p.c);
}

}  // namespace kiln::x86
