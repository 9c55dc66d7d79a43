// The x86 backend: float32 matmul groups (with batch dims, transposed/strided operands read in
// place, and an epilogue act(scale * A@B + bias) + residual) run on the asmjit GEMM driver.
// Constant weights are packed once at compile time. Groups it cannot take go to LLVM, and a
// declined float32 matmul is reported (counted as a fallback in stats()).
#include "codegen/backend.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/group_match.h"

#include <asmjit/core/api-config.h>
#include "jit/thread_pool.h"
#include "support/check.h"

#include <kiln/errors.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kiln {

namespace {

using ir::Node;
using ir::Op;
using x86::GroupPlan;
using x86::Mismatch;
using x86::OperandView;

// The leaf strides seen at run time: row-major ones (known at compile time unless the leaf has
// symbolic dims), or from the strides argument.
struct LeafStrides {
  std::vector<int64_t> dense;  // when !runtime and !symbolic
  ir::Shape shape;             // when symbolic: dense strides from the run-time extents
  bool runtime = false;
  bool symbolic = false;
  int offset = 0;
};

// strides == nullptr at compile time: runtime-strided leaves are then taken as dense (only used
// to pick listings and to pack constants, which are always dense). dims == nullptr: symbolic
// extents are taken as `kListingExtent`.
constexpr int64_t kListingExtent = 128;
int64_t leaf_stride(const LeafStrides& l, const int64_t* strides, const int64_t* dims, int d) {
  if (l.runtime && strides) return strides[l.offset + d];
  if (!l.symbolic) return l.dense[d];
  int64_t st = 1;
  for (size_t e = d + 1; e < l.shape.size(); ++e)
    st *= l.shape[e].is_symbolic() ? (dims ? dims[l.shape[e].sym] : kListingExtent)
                                   : std::max<int64_t>(1, l.shape[e].value);
  return st;
}

int64_t extent(const ir::Dim& d, const int64_t* dims) {
  return d.is_symbolic() ? (dims ? dims[d.sym] : kListingExtent) : d.value;
}

struct Resolved {
  int64_t offset = 0;
  std::vector<int64_t> stride;  // per operand dim
};

int64_t resolve_offset(const OperandView& v, const LeafStrides& ls, const int64_t* strides,
                       const int64_t* dims) {
  int64_t offset = 0;
  for (size_t e = 0; e < v.offset.size(); ++e)
    if (v.offset[e]) offset += v.offset[e] * leaf_stride(ls, strides, dims, static_cast<int>(e));
  return offset;
}

// Into `r`, reusing its storage (the call path of strided or symbolic operands allocates only the
// first time on a thread).
void resolve_into(Resolved& r, const OperandView& v, const LeafStrides& ls, const int64_t* strides,
                  const int64_t* dims) {
  r.offset = resolve_offset(v, ls, strides, dims);
  r.stride.resize(v.dim.size());
  for (size_t d = 0; d < v.dim.size(); ++d)
    r.stride[d] = v.dim[d] < 0 ? 0 : v.mult[d] * leaf_stride(ls, strides, dims, v.dim[d]);
}

Resolved resolve(const OperandView& v, const LeafStrides& ls, const int64_t* strides,
                 const int64_t* dims) {
  Resolved r;
  resolve_into(r, v, ls, strides, dims);
  return r;
}

// Operands of one launch resolved per call (strided or symbolic inputs): A's, B's and the
// residual's.
Resolved* runtime_operands() {
  thread_local Resolved operands[3];
  return operands;
}

// The bias a plan makes, ((negated ? -bias : bias) + const) * mult (* col[j] where the column
// scale comes after the bias terms) over N columns (bias: null for none), into `made`.
void make_bias(const GroupPlan& p, const float* bias, const float* col, int64_t N,
               std::vector<float>& made) {
  made.resize(size_t(N));
  const float sign = p.bias_negated ? -1.0f : 1.0f;
  for (int64_t j = 0; j < N; ++j)
    made[size_t(j)] = ((bias ? sign * bias[j] : 0.0f) + p.bias_const) * p.bias_mult *
                      (p.col_scale_post ? col[j] : 1.0f);
}

// The same per launch, in a per-thread vector that lives until the thread's next launch.
const float* made_bias(const GroupPlan& p, const float* bias, const float* col, int64_t N) {
  thread_local std::vector<float> made;
  make_bias(p, bias, col, N, made);
  return made.data();
}

class X86Kernel : public CompiledKernel {
 public:
  GroupPlan plan;
  std::vector<LeafStrides> leaves;
  std::shared_ptr<const x86::PackedB> packed;  // constant B packed at compile time
  std::shared_ptr<const ir::ConstantData> packed_source;
  // Operand addressing resolved at compile time; only operands of strided inputs are resolved
  // per call (the common dense case allocates nothing on the call path).
  Resolved a_fixed, b_fixed;
  int64_t bias_offset = 0;       // bias leaves are dense (the matcher requires it)
  int64_t col_scale_offset = 0;  // likewise
  Resolved residual_fixed;  // its batch strides (0 where broadcast), unless the leaf is symbolic
  // A made bias that reads no input (scalar terms alone or a constant vector, N exact): made once,
  // at compile time.
  std::vector<float> const_bias;
  bool dynamic_m = false, dynamic_nk = false, dynamic_batch = false;
  // Exact extents and strides, no batch dims: the GEMM plan resolved at compile time for a pool of
  // fixed_threads threads (a launch on another pool looks its plan up, ~60-80 ns).
  std::shared_ptr<const x86::GemmPlan> fixed_plan;
  int fixed_threads = 0;
  // A constant B that the fixed plan reads in place (packing it once did not pay on fixed_threads
  // threads): on a pool of another size that size's plan decides again, once per size, and B is
  // packed once (one copy for every size that packs) if it pays there (x86::gemm would pack it on
  // every call). fixed_problem: the fixed plan's problem (no data pointers).
  bool b_constant_in_place = false;
  x86::GemmProblem fixed_problem;
  struct PoolPlan {
    std::shared_ptr<const x86::GemmPlan> plan;
    const x86::PackedB* packed = nullptr;
  };
  mutable std::mutex pool_plans_mu;
  mutable std::map<int, PoolPlan> pool_plans;  // by thread count; entries never move
  mutable std::once_flag late_packed_once;
  mutable std::shared_ptr<const x86::PackedB> late_packed;

  // gp: this call's problem, its B the constant. Plans are made and B packed outside the lock
  // (launches on sizes already planned do not wait for them); a size planned twice at once keeps
  // the first.
  const PoolPlan& plan_for_pool(const x86::GemmProblem& gp, int threads) const {
    {
      std::lock_guard<std::mutex> lock(pool_plans_mu);
      auto it = pool_plans.find(threads);
      if (it != pool_plans.end()) return it->second;
    }
    PoolPlan pp;
    pp.plan = x86::GemmPlan::make(fixed_problem, x86::selected_isa(), threads, false);
    if (pp.plan->prepacked_b_pays()) {
      std::call_once(late_packed_once, [&] { late_packed = x86::pack_b(gp.b, gp.K, gp.N); });
      pp.packed = late_packed.get();
      pp.plan = x86::GemmPlan::make(fixed_problem, x86::selected_isa(), threads, true);
    }
    std::lock_guard<std::mutex> lock(pool_plans_mu);
    return pool_plans.emplace(threads, std::move(pp)).first->second;
  }

  void launch(void* const* bufs, const int64_t* strides, const int64_t* dims, const Schedule&,
              ThreadPool& pool) const override {
    const GroupPlan& p = plan;
    size_t nd = p.out_dims.size(), nb = nd - 2;
    const int64_t M = extent(p.out_dims[nb], dims), N = extent(p.out_dims[nb + 1], dims);
    const int64_t K = extent(p.K, dims);
    const LeafStrides& la = leaves[p.a.leaf];
    const LeafStrides& lb = leaves[p.b.leaf];
    // Operands of strided inputs, or of inputs with symbolic extents, are resolved per call.
    const bool a_call = la.runtime || la.symbolic, b_call = lb.runtime || lb.symbolic;
    // Per-thread storage, reached only when needed (a thread_local access is a __tls_get_addr
    // call in a shared library).
    const LeafStrides* lr = p.has_residual ? &leaves[p.residual.leaf] : nullptr;
    const bool r_call = lr && lr->symbolic;  // a residual leaf is dense: symbolic, or fixed
    Resolved* runtime = a_call || b_call || r_call ? runtime_operands() : nullptr;
    if (a_call) resolve_into(runtime[0], p.a, la, strides, dims);
    if (b_call) resolve_into(runtime[1], p.b, lb, strides, dims);
    const Resolved& a = a_call ? runtime[0] : a_fixed;  // both lvalues: no copy
    const Resolved& b = b_call ? runtime[1] : b_fixed;
    auto ptr = [&](int leaf, int64_t off) { return static_cast<const float*>(bufs[leaf]) + off; };
    float* c = static_cast<float*>(bufs[leaves.size()]);
    // Every field given: a default-initialized GemmProblem compiled to a `rep stosq` that cost
    // ~30 cycles on each launch.
    x86::GemmEpilogue epi{nullptr, plan.scale, plan.act, nullptr, 0, plan.residual_mul};
    if (p.has_bias) {
      const LeafStrides& lbias = leaves[p.bias.leaf];
      epi.bias = ptr(p.bias.leaf,
                     lbias.symbolic ? resolve_offset(p.bias, lbias, strides, dims) : bias_offset);
    }
    if (p.has_col_scale) {
      const LeafStrides& lcol = leaves[p.col_scale.leaf];
      epi.col_scale =
          ptr(p.col_scale.leaf,
              lcol.symbolic ? resolve_offset(p.col_scale, lcol, strides, dims) : col_scale_offset);
    }
    if (!const_bias.empty())
      epi.bias = const_bias.data();
    else if (p.bias_made_per_call())
      epi.bias = made_bias(p, epi.bias, epi.col_scale, N);
    // The residual's strides: rows ld_residual apart, batches (0 along dims it is broadcast
    // over) in r.stride[0, nb).
    if (r_call) resolve_into(runtime[2], p.residual, *lr, strides, dims);
    const Resolved& r = r_call ? runtime[2] : residual_fixed;
    if (p.has_residual) {
      epi.residual = ptr(p.residual.leaf, 0);
      epi.ld_residual = r.stride[nb];
    }
    const x86::GemmProblem gp{M,
                              N,
                              K,
                              {ptr(p.a.leaf, a.offset), a.stride[nb], a.stride[nb + 1]},
                              {ptr(p.b.leaf, b.offset), b.stride[nb], b.stride[nb + 1]},
                              c,
                              N,
                              epi,
                              dynamic_m,
                              dynamic_nk};
    if (nb == 0) {
      if (fixed_plan && pool.num_threads() == fixed_threads) {
        fixed_plan->run(gp, pool, packed.get());
      } else if (b_constant_in_place) {
        const PoolPlan& pp = plan_for_pool(gp, pool.num_threads());
        pp.plan->run(gp, pool, pp.packed);
      } else if (packed) {
        x86::gemm_prepacked(gp, *packed, pool);
      } else {
        x86::gemm(gp, pool);
      }
      return;
    }
    // Batch dims: the innermost goes to gemm_batched, the others are walked here.
    int64_t inner = extent(p.out_dims[nb - 1], dims);
    int64_t outer = 1;
    for (size_t d = 0; d + 1 < nb; ++d) outer *= extent(p.out_dims[d], dims);
    x86::BatchStrides bs{a.stride[nb - 1], b.stride[nb - 1], M * N,
                         p.has_residual ? r.stride[nb - 1] : 0};
    for (int64_t o = 0; o < outer; ++o) {
      int64_t rem = o, aoff = 0, boff = 0, roff = 0, coff = 0;
      for (size_t d = nb - 1; d-- > 0;) {
        const int64_t ext = extent(p.out_dims[d], dims);
        int64_t i = rem % ext;
        rem /= ext;
        aoff += i * a.stride[d];
        boff += i * b.stride[d];
        if (p.has_residual) roff += i * r.stride[d];
      }
      coff = o * inner * M * N;
      x86::GemmProblem q = gp;
      q.a.data += aoff;
      q.b.data += boff;
      q.c += coff;
      if (q.epi.residual) q.epi.residual += roff;
      x86::gemm_batched(q, inner, bs, pool);
    }
  }
};

class X86Backend : public Backend {
 public:
  std::string name() const override { return "x86"; }
  ArtifactKind artifact_kind() const override { return ArtifactKind::x86_blob; }
  std::string fingerprint() const override {
    return "x86 asmjit " + std::to_string(ASMJIT_LIBRARY_VERSION) + " isa=" + x86::isa_name();
  }

  bool can_compile(const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
                   Decline* decline) const override {
    std::string* why = &decline->why;
    if (g.kind != ir::GroupKind::matmul || !g.contraction) return false;
    const Node& mm = *g.contraction;
    if (mm.dtype != DType::f32 || g.root->dtype != DType::f32) return false;  // not its work
    if (!x86::available()) {
      *why = "the CPU (or KILN_ISA) offers neither AVX-512 nor AVX2+FMA";
      return false;
    }
    for (const auto& l : g.leaves)
      if (l->dtype != DType::f32) {
        *why = "a " + std::string(dtype_name(l->dtype)) + " input inside the fused group";
        return false;
      }
    GroupPlan p;
    Mismatch m = match(g, index_of(g), layouts, p);
    if (m.kind != Mismatch::Kind::none) {
      *why = m.why;
      // The GEMM itself is fine when only the epilogue is not of our form.
      decline->take_bare_contraction = m.kind == Mismatch::Kind::epilogue;
      return false;
    }
    return true;
  }

  std::shared_ptr<CompiledKernel> compile(const KernelRequest& req,
                                          std::vector<uint8_t>* artifact) override {
    auto t0 = std::chrono::steady_clock::now();
    const ir::FusionGroup& g = *req.group;
    auto k = std::make_shared<X86Kernel>();
    Mismatch m = match(g, index_of(g), req.layouts, k->plan);
    KILN_CHECK(m.kind == Mismatch::Kind::none) << m.why;
    for (size_t j = 0; j < g.leaves.size(); ++j) {
      LeafStrides ls;
      ls.runtime = req.layouts[j].runtime_strides;
      ls.offset = req.layouts[j].stride_offset;
      ls.shape = g.leaves[j]->shape;
      ls.symbolic = !ir::is_concrete(ls.shape);
      if (!ls.symbolic) ls.dense = ir::row_major_strides(ir::concrete_dims(ls.shape));
      k->leaves.push_back(ls);
    }
    const GroupPlan& p = k->plan;
    size_t nb = p.out_dims.size() - 2;
    k->dynamic_m = p.out_dims[nb].is_symbolic();
    k->dynamic_nk = p.out_dims[nb + 1].is_symbolic() || p.K.is_symbolic();
    k->a_fixed = resolve(p.a, k->leaves[p.a.leaf], nullptr, nullptr);
    k->b_fixed = resolve(p.b, k->leaves[p.b.leaf], nullptr, nullptr);
    // A bias varies along its last dim only, with unit stride: its offset never depends on
    // symbolic extents of other dims (it is 0 there or those dims have offset 0).
    if (p.has_bias)
      k->bias_offset = resolve_offset(p.bias, k->leaves[p.bias.leaf], nullptr, nullptr);
    if (p.has_col_scale)
      k->col_scale_offset =
          resolve_offset(p.col_scale, k->leaves[p.col_scale.leaf], nullptr, nullptr);
    if (p.has_residual)
      k->residual_fixed = resolve(p.residual, k->leaves[p.residual.leaf], nullptr, nullptr);
    // A made bias that reads no input (scalar terms alone, or constant vectors: x @ w - c,
    // g * (x @ w + c) with g constant) is made once here where N is exact.
    auto constant_data = [&](const OperandView& v, int64_t offset) -> const float* {
      const ir::Node& leaf = *g.leaves[v.leaf];
      if (leaf.op != Op::Constant) return nullptr;
      return reinterpret_cast<const float*>(leaf.attrs.data->bytes.data()) + offset;
    };
    if (p.bias_made_per_call() && !p.out_dims[nb + 1].is_symbolic()) {
      const float* bias = p.has_bias ? constant_data(p.bias, k->bias_offset) : nullptr;
      const float* col =
          p.col_scale_post ? constant_data(p.col_scale, k->col_scale_offset) : nullptr;
      if ((!p.has_bias || bias) && (!p.col_scale_post || col))
        make_bias(p, bias, col, p.out_dims[nb + 1].value, k->const_bias);
    }
    // The problem with dense strides where they are runtime (and, with symbolic extents, one
    // representative extent, kListingExtent): the listing's, and the fixed plan's.
    x86::GemmProblem lp;
    lp.M = extent(p.out_dims[nb], nullptr);
    lp.N = extent(p.out_dims[nb + 1], nullptr);
    lp.K = extent(p.K, nullptr);
    lp.dynamic_m = k->dynamic_m;
    lp.dynamic_nk = k->dynamic_nk;
    lp.a = {nullptr, k->a_fixed.stride[nb], k->a_fixed.stride[nb + 1]};
    lp.b = {nullptr, k->b_fixed.stride[nb], k->b_fixed.stride[nb + 1]};
    lp.ldc = lp.N;
    lp.epi.act = p.act;
    lp.epi.scale = p.scale;
    static const float dummy = 0;
    if (p.has_bias || p.has_bias_const) lp.epi.bias = &dummy;
    if (p.has_col_scale) lp.epi.col_scale = &dummy;
    if (p.has_residual) {
      lp.epi.residual = &dummy;
      lp.epi.ld_residual = k->residual_fixed.stride[nb];
      lp.epi.residual_mul = p.residual_mul;
    }
    bool runtime = false, symbolic = false;
    for (const auto& l : k->leaves) {
      runtime = runtime || l.runtime;
      symbolic = symbolic || l.symbolic;
    }
    const bool fixed = nb == 0 && !runtime && !symbolic && !k->dynamic_m && !k->dynamic_nk;
    std::shared_ptr<const x86::GemmPlan> in_place;  // the fixed plan reading B as it is
    if (fixed) {
      k->fixed_threads = ThreadPool::global().num_threads();
      in_place = x86::GemmPlan::make(lp, x86::selected_isa(), k->fixed_threads, false);
    }
    // A constant weight shared by every batch is packed once, now, unless the fixed plan reads it
    // faster in place (GemmPlan::prepacked_b_pays). With M symbolic, the plan at the listing's
    // extent stands for the calls: a B small enough for the direct kernels' blocks
    // (plan_direct_blocks) is read in place (packed, it sent every call to the packed path, which
    // packs A: 100000x3 @ a constant 3x3, 114 us a call against 49 us with M exact).
    const Node& bleaf = *g.leaves[p.b.leaf];
    bool b_broadcast = true;
    for (size_t d = 0; d < nb; ++d) b_broadcast = b_broadcast && p.b.dim[d] < 0;
    std::shared_ptr<const x86::GemmPlan> pays_probe = in_place;
    if (!fixed && nb == 0 && k->dynamic_m && !k->dynamic_nk && bleaf.op == Op::Constant)
      pays_probe =
          x86::GemmPlan::make(lp, x86::selected_isa(), ThreadPool::global().num_threads(), false);
    if (bleaf.op == Op::Constant && nb == 0 && b_broadcast && !k->dynamic_nk &&
        (!pays_probe || pays_probe->prepacked_b_pays())) {
      const Resolved& b = k->b_fixed;
      const float* data = reinterpret_cast<const float*>(bleaf.attrs.data->bytes.data()) + b.offset;
      k->packed =
          x86::pack_b({data, b.stride[nb], b.stride[nb + 1]}, p.K.value, p.out_dims[nb + 1].value);
      k->packed_source = bleaf.attrs.data;
    }
    if (fixed) {
      k->fixed_plan = k->packed
                          ? x86::GemmPlan::make(lp, x86::selected_isa(), k->fixed_threads, true)
                          : in_place;
      k->fixed_problem = lp;
      k->b_constant_in_place = bleaf.op == Op::Constant && !k->packed;
    }
    // The listing of the kernels this problem runs.
    if (req.keep_text && !runtime)
      k->asm_text = k->fixed_plan ? x86::listing_of(*k->fixed_plan) : x86::listing_for(lp);
    k->name = req.name;
    k->backend = "x86";
    for (const auto& n : g.nodes) k->ops.emplace_back(ir::op_name(n->op));
    k->compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // No artifact: the asmjit kernels this launches are cached on disk by the x86 kernel registry
    // itself (keyed by their descriptors), so the backend keeps no entries of its own.
    (void)artifact;
    return k;
  }

  std::shared_ptr<CompiledKernel> load(const KernelRequest&, const std::vector<uint8_t>&) override {
    throw CompileError("the x86 backend keeps no disk cache entries");
  }

 private:
  static std::unordered_map<const Node*, int> index_of(const ir::FusionGroup& g) {
    std::unordered_map<const Node*, int> m;
    for (size_t j = 0; j < g.leaves.size(); ++j) m[g.leaves[j].get()] = static_cast<int>(j);
    return m;
  }
};

}  // namespace

Backend* x86_backend() {
  static X86Backend b;
  return &b;
}

}  // namespace kiln
