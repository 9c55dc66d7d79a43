// The direct_rows path: direct kernels over M in chunks of whole row blocks, one chunk per thread
// (for a symbolic M, blocks of a fixed number of rows: plan_direct_blocks), B read in place or,
// where its columns are not unit-stride, copied row-major by each thread. gemm_driver.cpp decides
// when a problem takes it (B within a share of L2, kDirectRowsBShare).
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/generators.h"
#include "codegen/x86/pack.h"
#include "jit/thread_pool.h"

#include <algorithm>
#include <array>

namespace kiln::x86 {

namespace {

// Even chunks against whole row blocks (Intel Xeon, paired plans, 2 threads): 28x16x1024 (20 + 8
// rows -> 14 + 14) 1.18x, 50x16x2000 1.12x, 64x8x1024 1.03x; under the ratio they ran 0.96-1.04x
// (80^3, 100^3, 128^3, 200^3, 300x64x64, 400x128x256, 1000x64x512).
constexpr double kDirectRowsEvenSplit = 1.1;

}  // namespace

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

bool GemmPlan::Impl::plan_direct_rows(const GemmProblem& p, const KernelDesc& base, int64_t T,
                                      const CacheSizes& caches, bool split_only) {
  if (p.dynamic_m) return plan_direct_blocks(p, base, T, caches), true;
  // Whole row blocks of the direct kernel's tiling per chunk, one chunk per thread; even chunks
  // where whole blocks leave the busiest over kDirectRowsEvenSplit of an even share (each
  // kernel evens out its own row blocks).
  const int64_t rows_cap = direct_rows_cap(p, isa, caches);
  const int64_t rows_max = direct_tiling(isa == Isa::avx512, p.M, p.N, rows_cap).rows_max;
  const int64_t blocks = ceil_div(p.M, rows_max), tasks = std::min(T, blocks);
  if (split_only && tasks < 2) return false;
  path = Path::direct_rows;
  const int64_t b_rs = plan_direct_rows_b(p);
  chunk = ceil_div(blocks, tasks) * rows_max;
  if (double(chunk) > kDirectRowsEvenSplit * double(p.M) / double(tasks))
    chunk = ceil_div(p.M, tasks);
  nchunks = ceil_div(p.M, chunk);
  const int64_t last_chunk = p.M - (nchunks - 1) * chunk;
  for (int lc = 0; lc < 2; ++lc) {
    if (lc == 0 && nchunks == 1) continue;
    direct_rows[lc] = use(direct_desc(base, p, lc ? last_chunk : chunk, p.N, p.K, b_rs, rows_cap));
  }
  return true;
}

int64_t GemmPlan::Impl::plan_direct_rows_b(const GemmProblem& p) {
  copy_b = p.b.col_stride != 1;
  b_row_stride = p.b.row_stride, b_col_stride = p.b.col_stride;
  return copy_b ? p.N : p.b.row_stride;
}

void GemmPlan::Impl::plan_direct_blocks(const GemmProblem& p, const KernelDesc& base, int64_t T,
                                        const CacheSizes& caches) {
  // The tiling a tall C takes (a block of rows_max rows), whatever this call's M.
  GemmProblem tall = p;
  tall.M = kDynamicTallRows;
  const int64_t rows_cap = direct_rows_cap(tall, isa, caches);
  block_rows = direct_tiling(isa == Isa::avx512, tall.M, p.N, rows_cap).rows_max;
  const int64_t blocks = ceil_div(p.M, block_rows);
  const int64_t tasks =
      p.M * ceil_div(p.N, isa_lanes(isa)) * p.K >= kSmallSplitMinFmas ? std::min(T, blocks) : 1;
  path = Path::direct_rows;
  const int64_t b_rs = plan_direct_rows_b(p);
  chunk = ceil_div(blocks, tasks) * block_rows;
  nchunks = ceil_div(p.M, chunk);
  const int64_t tail = p.M % block_rows;
  if (p.M >= block_rows)
    direct_rows[0] = use(direct_desc(base, p, block_rows, p.N, p.K, b_rs, rows_cap));
  direct_rows[1] =
      tail ? use(direct_desc(base, p, tail, p.N, p.K, b_rs, rows_cap)) : direct_rows[0];
}

namespace {

// One chunk of direct_rows, as ThreadPool::run_parts hands it to a thread (the payload shares one
// cache line with the post's number).
struct DirectRowsJob {
  const GemmPlan::Impl* plan;
  const float* a;
  const float* b;
  float* c;
  const float* bias;
  const float* residual;
  float scale;
};

// B as a chunk reads it: with copy_b, copied row-major into this thread's scratch. Each thread
// copies its own: one copy by the calling thread, read by the others, cost more in moving its
// lines between cores than the copy (64x64x64 x @ w.T 8.0 us a call, against 3.4 us on one
// thread before and 2.1 us with B row-major).
const float* chunk_b(const GemmPlan::Impl& s, const float* b) {
  if (!s.copy_b) return b;
  float* copy = thread_scratch(ScratchSlot::b_copy, size_t(s.K * s.N));
  copy_b_rowmajor(MatrixRef{b, s.b_row_stride, s.b_col_stride}, s.K, s.N, copy);
  return copy;
}

void run_direct_rows_chunk(const DirectRowsJob& job, int chunk) noexcept {
  const GemmPlan::Impl& s = *job.plan;
  const Kernel& k = *s.direct_rows[chunk == s.nchunks - 1];
  const KernelDesc& d = k.desc;  // the problem's strides (every chunk's kernel has them)
  const int64_t r0 = chunk * s.chunk;
  const KernelArgs args{job.bias, job.residual ? job.residual + r0 * d.ld_res : nullptr, s.K, 0, 0,
                        job.scale};
  k.fn(&args, job.a + r0 * d.a_rs, chunk_b(s, job.b), job.c + r0 * d.ldc);
}

// One chunk of direct_blocks: its rows in blocks of block_rows, the problem's last block (M mod
// block_rows rows, where there are any) by the tail kernel.
void run_direct_blocks_chunk(const DirectRowsJob& job, int chunk) noexcept {
  const GemmPlan::Impl& s = *job.plan;
  const float* b = chunk_b(s, job.b);
  const int64_t r1 = std::min(s.M, (chunk + 1) * s.chunk);
  for (int64_t r0 = chunk * s.chunk; r0 < r1; r0 += s.block_rows) {
    const Kernel& k = *s.direct_rows[r0 + s.block_rows > s.M];
    const KernelDesc& d = k.desc;
    const KernelArgs args{
        job.bias, job.residual ? job.residual + r0 * d.ld_res : nullptr, s.K, 0, 0, job.scale};
    k.fn(&args, job.a + r0 * d.a_rs, b, job.c + r0 * d.ldc);
  }
}

}  // namespace

void GemmPlan::Impl::run_direct_rows(const GemmProblem& p, ThreadPool* pool) const {
  const DirectRowsJob job{this, p.a.data, p.b.data, p.c, p.epi.bias, p.epi.residual, p.epi.scale};
  const auto run_chunk = block_rows > 0 ? run_direct_blocks_chunk : run_direct_rows_chunk;
  if (pool && nchunks > 1 && nchunks <= pool->num_threads()) {
    if (block_rows > 0)
      pool->run_parts<DirectRowsJob, run_direct_blocks_chunk>(int(nchunks), job);
    else
      pool->run_parts<DirectRowsJob, run_direct_rows_chunk>(int(nchunks), job);
  } else {
    // No pool, one chunk, or a pool smaller than the plan's threads (its chunks then shared out).
    parallel(pool, nchunks, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) run_chunk(job, int(c));
    });
  }
}

}  // namespace kiln::x86
