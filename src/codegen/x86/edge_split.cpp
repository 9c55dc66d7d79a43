// The last column of C on the dot path (Path::edge_split): where N is one past a multiple of the
// vector width, the direct kernels give that column a vector of its own, one lane of it used, so
// a third or more of their FMAs do nothing (33 columns: three vectors where 32 take two). The
// plan runs the other columns on one direct kernel and the last one as A @ b, one dot product
// per row (a K/16 of the FMAs). Only where the other columns take one direct kernel (one
// thread): with direct_rows' two threads the last column's dot products, run on the calling
// thread after the chunks, read A's rows and write C's lines that the other thread holds
// (64x65x64 0.85x, 100x65x100 0.98x a call). Paired plans, split against one kernel over all of C
// (Intel Xeon), AVX-512: 33x33x33 1.22x, 23x33x91 1.32x, 48x33x48 1.28x, 64x17x64 1.72x,
// 32x17x32 1.45x, 40x33x64 1.32x, 33x49x33 1.12x, 16x49x49 1.14x, 16x33x32 1.12x, 8x17x64 1.16x,
// 24x33x24 1.09x, 33x17x17 1.06x; AVX2 33x33x33 1.19x, 33x17x33 1.32x, 48x9x48 1.54x,
// 33x25x33 1.08x. The dot path's fixed cost (~40 ns) outweighs it below kEdgeSplitMinWork: 16x17x16
// 0.93x, 17x33x17 0.88x, 4x33x100 0.98x, AVX2 16x9x16 0.88x, 9x9x9 0.48x. Two columns past the
// width did not pay (33x34x33 1.01x, 33x35x33 0.93x, separate plans).
#include "codegen/x86/gemm_plan.h"

#include <algorithm>

namespace kiln::x86 {

namespace {

// M * K at least: the FMAs the split saves (about one per row and k-step) against the dot
// path's fixed cost.
constexpr int64_t kEdgeSplitMinWork = 512;

// All of C but its last column.
GemmProblem main_of(const GemmProblem& p) {
  GemmProblem q = p;
  q.N = p.N - 1;
  return q;
}

// C's last column: B's, the bias and column scale of that column, the residual's.
GemmProblem edge_of(const GemmProblem& p) {
  GemmProblem q = p;
  const int64_t j = p.N - 1;
  q.N = 1;
  q.b.data = p.b.data ? p.b.data + j * p.b.col_stride : nullptr;
  q.c = p.c ? p.c + j : nullptr;
  if (p.epi.bias) q.epi.bias = p.epi.bias + j;
  if (p.epi.col_scale) q.epi.col_scale = p.epi.col_scale + j;
  if (p.epi.residual) q.epi.residual = p.epi.residual + j;
  return q;
}

}  // namespace

bool GemmPlan::Impl::plan_edge_split(const GemmProblem& p, int threads, const CacheSizes& caches) {
  const int64_t lanes = isa_lanes(isa);
  // (Within the small volume only: the direct kernel's, so that a main plan is made, and its
  // kernels generated, only where it may be taken.)
  if (p.dynamic_m || p.dynamic_nk || p.N <= lanes || p.N % lanes != 1 ||
      p.M * p.K < kEdgeSplitMinWork || p.M * (p.N - 1) * p.K > kSmallVolume)
    return false;
  const GemmProblem edge = edge_of(p);
  if (dot_path_for(edge, isa, false, caches) != DotOver::a_rows) return false;
  auto main_plan = GemmPlan::make(main_of(p), isa, threads, false, caches);
  const Path main_path = main_plan->impl_->path;
  if (main_path != Path::direct) return false;
  path = Path::edge_split;
  split_main = std::move(main_plan);
  split_edge = GemmPlan::make(edge, isa, threads, false, caches);
  for (const auto* part : {split_main.get(), split_edge.get()})
    for (const Kernel* k : part->impl_->used)
      if (std::find(used.begin(), used.end(), k) == used.end()) used.push_back(k);
  return true;
}

void GemmPlan::Impl::run_edge_split(const GemmProblem& p, ThreadPool* pool) const {
  // Counted once, as the main part's path (direct) and as an edge split; not as a dot call.
  split_main->impl_->run(main_of(p), pool, nullptr);
  split_edge->impl_->run_dot(edge_of(p), pool);
}

}  // namespace kiln::x86
