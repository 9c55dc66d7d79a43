// The stream path (stream_kernel.cpp) for GEMVs: M = 1 with B's rows unit-stride (B streamed row
// by row into a chunk of C kept in L1, the chunks over the threads, or runs of K with partial
// rows added after them), and A.T @ b for one column b, run as its transpose; and, on some cores,
// 2 to kStreamMaxRows rows of C (stream_rows_kernel.cpp, stream_rows_for).
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/generators.h"
#include "codegen/x86/pack.h"

#include <algorithm>

namespace kiln::x86 {

namespace {

// Stream (GEMV) chunks: at most this many columns (C's chunk stays in L1), at least kStreamMin
// per thread's share so that small N is not split into slivers.
constexpr int64_t kStreamMaxCols = 4096;
constexpr int64_t kStreamMinCols = 256;
// Over M rows: chunks whose M rows of C and four rows of B (held in L1 where more than two rows
// reread them) take at most this much (of L1's 32 KiB; the rest for A's elements and the stack).
constexpr int64_t kStreamRowsL1Bytes = 24 * 1024;
// Stream K split: where fewer chunks of at most kStreamMaxCols columns than threads cover N, the
// threads split K instead (each over all of its chunk's columns, into C or a partial row summed
// after): every task then reads one contiguous run of B's rows front to back, instead of a narrow
// run of each row (chunks of N / threads columns, a row stride apart). Taken for at least
// kStreamSplitMinElems elements of B (reached only with a symbolic M: the direct kernel takes
// smaller GEMVs) and kStreamMinRows rows of K a task. Measured on the Zen 3 (2 threads, paired
// plans, M x N x K), split over K against over N, B from memory (a model's weights: 256 MB of
// copies rotated): 1x1024x1024 1.54x, 1x1024x4096 1.88x, 1x4096x1024 1.09x, 1x4096x4096 1.15x;
// the same B on every call: 1x1024x1024 1.28x, 1x1024x4096 3.97x (the N split's 512-column runs
// of 4 KiB rows ran at 7 GFLOP/s), 1x4096x1024 1.22x, 1x4096x4096 1.18x, 1x2048x512 1.10x.
constexpr int64_t kStreamSplitMinElems = 32 * 1024;
constexpr int64_t kStreamMinRows = 64;
// K tasks of the stream path for a 1 x N x K problem on T threads (1: split over N only).
int64_t stream_k_tasks(int64_t N, int64_t K, int64_t T) {
  const int64_t n_chunks = ceil_div(N, kStreamMaxCols);
  if (n_chunks >= T || N * K < kStreamSplitMinElems) return 1;
  return std::max<int64_t>(1, std::min(T / n_chunks, K / kStreamMinRows));
}

// The stream kernel addresses four rows of B and A's four elements with 32-bit displacements.
bool stream_fits(const GemmProblem& p) {
  auto mag = [](int64_t v) { return v < 0 ? -v : v; };
  return p.a.col_stride > 0 && p.b.row_stride > 0 &&
         5 * mag(p.b.row_stride) + p.N + 64 < (int64_t{1} << 28) &&
         4 * mag(p.a.col_stride) < (int64_t{1} << 28);
}

}  // namespace

// Whether the stream path can run p (GEMV, B's rows forward with unit column stride).
bool stream_can(const GemmProblem& p, bool prepacked_b) {
  return !prepacked_b && p.M == 1 && p.b.col_stride == 1 && !p.dynamic_nk && stream_fits(p);
}

// A.T @ x: a one-column C whose A has unit-stride columns (before: packed, A packed on every
// call, 2.6 GB/s on the Zen 3 at 4096x1x4096), run as its transpose C.T [1, M] = B.T [1, K] @
// A.T [K, M], a GEMV over A's columns on the stream path; C and the residual must be contiguous
// columns, and the bias (one value) is broadcast over C.T's row.
bool column_as_row_fits(const GemmProblem& p) {
  return p.N == 1 && p.M > 1 && !p.dynamic_m && p.a.row_stride == 1 && p.a.col_stride != 1 &&
         p.ldc == 1 && (!p.epi.residual || p.epi.ld_residual == 1);
}
GemmProblem row_problem_of_column(const GemmProblem& p) {
  GemmProblem t = p;
  t.M = 1;
  t.N = p.M;
  t.a = {p.b.data, 0, p.b.row_stride};
  t.b = {p.a.data, p.a.col_stride, 1};
  t.ldc = t.N;
  t.epi.ld_residual = t.N;
  return t;
}

// The stream path for a GEMV p (M = 1, B's columns unit-stride); base: p's epilogue. A bias
// broadcast over C's row (base.bias_bcast) keeps the split over N (the K split's epilogue kernels
// read one bias value per column).
void GemmPlan::Impl::plan_stream(const GemmProblem& p, const KernelDesc& base, int64_t T) {
  path = Path::stream;
  const int64_t vl = isa_lanes(isa);
  const int64_t tk = base.bias_bcast ? 1 : stream_k_tasks(p.N, p.K, T);
  if (tk > 1) {
    chunk = round_up(ceil_div(p.N, ceil_div(p.N, kStreamMaxCols)), vl);
  } else {
    const int64_t share = std::max(kStreamMinCols, ceil_div(p.N, T));
    chunk = round_up(std::min(kStreamMaxCols, share), vl);
  }
  nchunks = ceil_div(p.N, chunk);
  const int64_t last_chunk = p.N - (nchunks - 1) * chunk;
  // With a K split the stream kernels sum into C and partial rows, and the epilogue comes
  // after the sum (reduce_k_split, with the packed kernels over no K steps).
  blk.tk = tk;
  if (tk > 1) {
    blk.MR = packed_mr(isa);
    blk.NR = packed_nr(isa);
    blk.mtiles = 1;
    blk.npanels = ceil_div(p.N, blk.NR);
    if (base.has_epilogue()) use_packed(base, 1, 1);
  }
  for (int lc = 0; lc < 2; ++lc) {
    if (lc == 0 && nchunks == 1) continue;
    KernelDesc d = tk > 1 ? epilogue_desc(GemmProblem{}, isa) : base;
    d.kind = KernelKind::stream;
    d.rows = 1;
    d.cols = lc ? last_chunk : chunk;
    d.a_cs = p.a.col_stride;
    d.b_rs = p.b.row_stride;
    d.ld_res = 0;
    stream[lc] = use(d);
  }
}

// Whether the stream path can run p over its M rows (stream_rows_kernel.cpp): exact dims, A's
// rows and columns forward, B's columns unit-stride and its rows forward, within the kernel's
// displacements, at most kStreamMaxRows rows.
bool stream_rows_can(const GemmProblem& p, bool prepacked_b) {
  return !prepacked_b && p.M >= 2 && p.M <= kStreamMaxRows && !p.dynamic_m && !p.dynamic_nk &&
         p.a.row_stride > 0 && p.a.col_stride > 0 && p.b.col_stride == 1 && p.b.row_stride > 0 &&
         p.ldc >= p.N && (!p.epi.residual || p.epi.ld_residual >= p.N) &&
         stream_rows_reach_fits(p.M, std::min(p.N, kStreamMaxCols), p.a.row_stride, p.a.col_stride,
                                p.b.row_stride, p.ldc, p.epi.residual ? p.epi.ld_residual : 0);
}

// The stream path over a few rows of C instead of the direct, skinny or packed paths: on AMD Zen
// cores that run 256-bit ops whole, AVX2, from kStreamRowsMinK of K, where B's rows are at least
// kStreamRowsMinRowBytes apart (the direct and skinny kernels walk B down its columns, a page or
// more between loads: see kSkinnyMaxRowBytes in skinny_path.cpp; the packed path packs all of B
// for a few rows). AMD EPYC Zen 3, paired plans against the plans before, 2 threads (one):
// 2x4096x1024 2.03x (2.75x), 3x4096x1024 1.72x, 4x1024x1024 1.99x (1.84x), 6x4096x1024 1.34x,
// 8x4096x1024 2.2x (2.23x), 10x4096x1024 2.07x, 12x4096x1024 1.75x (1.72x), 12x1024x1024
// (2.04x), 8x4096x4096 1.59x, 4x11008x4096 1.52x, 8x2048x128 1.98x (2.16x), 8x4096x64 1.89x,
// 8x4096x32 1.63x, 4x4096x48 1.31x, 12x2048x64 1.41x, 16x512x512 1.15x, 8x768x3072 (rows 3 KiB
// apart) 1.12x; past the bounds 14x4096x1024 1.04x and 16x4096x1024 0.92x (packed),
// rows under a page apart 8x1000x1000 0.89x, 16x768x3072 0.84x, 12x300x300 0.80x, 5x1000x333
// 0.79x, and a short K 6x4096x16 0.76x (one thread). Rows 13-16 measured again with the bound
// at 16 (same machine, later session): 16x1024x1024 1.02-1.33x over four runs, 16x1024x2048
// 1.38x, 16x1280x1024 1.42x, 16x1024x512 1.14x, 14x1024x1024 1.01x, but 13x1024x1024
// 0.90-0.97x, 16x2048x1024 0.86x, 16x2048x2048 0.91x, 16x4096x1024 1.00x, 16x11008x4096
// 0.96x: no clean bound, kept at 12. Not measured on Intel's cores (whose skinny rules were)
// nor on split-256 ones.
constexpr int64_t kStreamRowsMinK = 32;
constexpr int64_t kStreamRowsMinRowBytes = 4096;

bool stream_rows_for(const GemmProblem& p, Isa isa, bool prepacked_b, const CacheSizes& caches) {
  return caches.amd_zen && !caches.split_256 && isa == Isa::avx2 && p.K >= kStreamRowsMinK &&
         p.b.row_stride * 4 >= kStreamRowsMinRowBytes && stream_rows_can(p, prepacked_b);
}

// The stream path over the M rows of p (stream_rows_can): N in chunks whose M rows of C and four
// rows of B take at most kStreamRowsL1Bytes (they stay in L1 while B's rows stream past; B's
// only where more than one pair of rows rereads them), as evenly as that allows over the
// threads; each chunk over all of K.
void GemmPlan::Impl::plan_stream_rows(const GemmProblem& p, const KernelDesc& base, int64_t T) {
  path = Path::stream;
  const int64_t vl = isa_lanes(isa);
  // B's four rows stay in L1 for the passes of the rows after the first pair; with one pair
  // (M = 2) they are read once and only C's block counts (2x4096x1024, chunks of 2048 columns
  // against 1024, paired, 2 threads: 1.07-1.19x; 2x4096x4096 1.08-1.19x, 2x11008x4096 1.07x).
  const int64_t b_rows_held = p.M > 2 ? 4 : 0;
  const int64_t fit = std::max(vl, kStreamRowsL1Bytes / (4 * (p.M + b_rows_held)) / vl * vl);
  const int64_t share = round_up(ceil_div(p.N, T), vl);
  nchunks = ceil_div(p.N, std::min(fit, share));
  chunk = round_up(ceil_div(p.N, nchunks), vl);
  nchunks = ceil_div(p.N, chunk);
  const int64_t last_chunk = p.N - (nchunks - 1) * chunk;
  blk.tk = 1;
  for (int lc = 0; lc < 2; ++lc) {
    if (lc == 0 && nchunks == 1) continue;
    KernelDesc d = base;
    d.kind = KernelKind::stream;
    d.rows = p.M;
    d.cols = lc ? last_chunk : chunk;
    d.a_rs = p.a.row_stride;
    d.a_cs = p.a.col_stride;
    d.b_rs = p.b.row_stride;
    d.ldc = p.ldc;
    d.ld_res = p.epi.residual ? p.epi.ld_residual : 0;
    stream[lc] = use(d);
  }
}

void GemmPlan::Impl::run_stream(const GemmProblem& p, ThreadPool* pool) const {
  // Task t: chunk t % nchunks over K run t / nchunks, into C (the first run) or a partial row.
  const int64_t tk = blk.tk;
  float* partials = tk > 1 ? thread_scratch(ScratchSlot::k_partial, size_t((tk - 1) * N)) : nullptr;
  parallel(pool, nchunks * tk, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c = t % nchunks, kt = t / nchunks;
      const int64_t j0 = c * chunk, k0 = kt * K / tk, k1 = (kt + 1) * K / tk;
      float* y = kt == 0 ? p.c : partials + (kt - 1) * N;
      // A one-column C's transpose: its one bias value for every chunk.
      KernelArgs args{nullptr,    p.epi.residual ? p.epi.residual + j0 : nullptr, k1 - k0, 0, 0,
                      p.epi.scale};
      set_columns(args, p.epi, column_as_row ? 0 : j0);
      if (M > 1 && !column_as_row)
        args.c_block =
            thread_scratch(ScratchSlot::c_block, size_t(M * stream_rows_block_ld(chunk)));
      stream[c == nchunks - 1]->fn(&args, p.a.data + k0 * p.a.col_stride,
                                   p.b.data + k0 * p.b.row_stride + j0, y + j0);
    }
  });
  if (tk > 1) reduce_k_split(p, partials, pool);
}

}  // namespace kiln::x86
