// A seeded random-program generator compared against the reference interpreter: at least 200
// random graphs of 3 to 20 ops per run, mixing elementwise ops, broadcasts, reductions (keepdims),
// views (transpose, slice, reshape, new axes), matmul, concat, casts and the composites, over
// random shapes (size 1 included), dtypes and layouts. On a failure it prints the seed, the program
// (ir::print) and the mismatch; KILN_RANDOM_SEED=<n> reruns one program.
//
// Values are kept bounded by construction: every value carries a bound on |x|, and a value past the
// bound goes through tanh before it is used again; log/sqrt/rsqrt/division see abs(x) + c. Ops
// whose result is not continuous in their input (comparisons, casts to integers or to narrower
// floats) are applied only to "exact" values (inputs and views/exact ops of them), so that an ulp
// of difference between kiln and the oracle can never flip a result.
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <cstdlib>

using namespace jt;
using kiln::Index;
using kiln::Tensor;

namespace {

struct Value {
  Tensor t;
  double bound = 2;   // |x| <= bound (estimate)
  bool exact = true;  // computed without rounding from inputs (inputs, views, casts up, ...)
  bool is_input = false;
};

std::vector<int64_t> shape_of(const Tensor& t) { return t.shape(); }

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

class Generator {
 public:
  Generator(uint64_t seed, int num_ops) : rng_(seed), num_ops_(num_ops) {}

  // The program. Deterministic: each trace makes the same choices.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) {
    pool_.clear();
    scale_ = 1;
    log_.clear();
    for (const Tensor& t : inputs) pool_.push_back({t, 2, true, true});
    int done = 0, guard = 0;
    while (done < num_ops_ && guard++ < 200)
      if (step()) ++done;
    std::vector<Tensor> outs = {pool_.back().t};
    if (pool_.size() > inputs.size() + 1 && uniform_int(rng_, 0, 2) == 0) {
      size_t i = static_cast<size_t>(uniform_int(rng_, static_cast<int64_t>(inputs.size()),
                                                 static_cast<int64_t>(pool_.size()) - 2));
      outs.push_back(pool_[i].t);
    }
    return outs;
  }
  double tol_scale() const { return scale_; }
  const std::string& log() const { return log_; }

 private:
  Rng rng_;
  int num_ops_;
  std::vector<Value> pool_;
  double scale_ = 1;
  std::string log_;

  int64_t ri(int64_t lo, int64_t hi) { return uniform_int(rng_, lo, hi); }
  bool coin(int n = 2) { return ri(0, n - 1) == 0; }

  // Prefers recent values.
  size_t pick_value() {
    int64_t n = static_cast<int64_t>(pool_.size());
    return static_cast<size_t>(coin(3) ? ri(0, n - 1) : ri(std::max<int64_t>(0, n - 3), n - 1));
  }
  void push(Tensor t, double bound, bool exact, const std::string& what) {
    // Keep everything small enough for the interpreter and for bounded values.
    if (bound > 30) {
      t = kiln::tanh(t);
      bound = 1;
      exact = false;
    }
    pool_.push_back({std::move(t), bound, exact, false});
    log_ += what + "; ";
  }
  DType float_of(const Tensor& t) { return kiln::is_floating(t.dtype()) ? t.dtype() : DType::f32; }

  Tensor random_constant(const std::vector<int64_t>& shape, DType t, bool positive = false) {
    std::vector<uint8_t> bytes(static_cast<size_t>(numel_of(shape)) * kiln::dtype_size(t));
    for (int64_t i = 0; i < numel_of(shape); ++i)
      store_value(bytes.data() + i * static_cast<int64_t>(kiln::dtype_size(t)), t,
                  random_value(rng_, t, positive ? Values::positive : Values::normal));
    return kiln::constant(bytes.data(), shape, t);
  }

  // A pool value whose shape broadcasts with `s` (or a new constant of such a shape).
  Value partner(const std::vector<int64_t>& s, DType t) {
    std::vector<size_t> ok;
    for (size_t i = 0; i < pool_.size(); ++i) {
      auto o = shape_of(pool_[i].t);
      kiln::ir::Shape out;
      if (kiln::ir::broadcast_shapes(kiln::ir::concrete_shape(s), kiln::ir::concrete_shape(o),
                                     out) &&
          kiln::ir::concrete_dims(out) == s && kiln::is_floating(pool_[i].t.dtype()))
        ok.push_back(i);
    }
    if (!ok.empty() && !coin(4)) return pool_[pick(rng_, ok)];
    // A constant: a suffix of s with some dims set to 1.
    size_t keep = static_cast<size_t>(ri(0, static_cast<int64_t>(s.size())));
    std::vector<int64_t> cs(s.end() - static_cast<std::ptrdiff_t>(keep), s.end());
    for (auto& d : cs)
      if (coin(3)) d = 1;
    return {random_constant(cs, t), 2, true, false};
  }

  bool step() {
    const size_t vi = pick_value();
    const Value v = pool_[vi];  // a copy: push() may reallocate the pool
    Tensor x = v.t;
    const auto s = shape_of(x);
    const int nd = static_cast<int>(s.size());
    if (!kiln::is_floating(x.dtype())) {
      // Integers only come from exact casts; bring them back to float.
      push(x.astype(DType::f32), v.bound, v.exact, "astype f32");
      return true;
    }
    switch (ri(0, 13)) {
      case 0: {  // unary
        switch (ri(0, 11)) {
          case 0:
            push(kiln::tanh(x), 1, false, "tanh");
            break;
          case 1:
            push(kiln::sigmoid(x), 1, false, "sigmoid");
            break;
          case 2:
            if (v.bound > 3) return false;
            push(kiln::exp(x), std::exp(v.bound), false, "exp");
            break;
          case 3:
            push(kiln::relu(x), v.bound, v.exact, "relu");
            break;
          case 4:
            push(kiln::abs(x), v.bound, v.exact, "abs");
            break;
          case 5:
            push(-x, v.bound, v.exact, "neg");
            break;
          case 6:
            if (v.bound > 5) return false;
            push(kiln::square(x), v.bound * v.bound, false, "square");
            break;
          case 7:
            push(kiln::gelu(x, coin()), v.bound, false, "gelu");
            break;
          case 8:
            push(kiln::silu(x), v.bound, false, "silu");
            break;
          case 9:
            push(kiln::erf(x), 1, false, "erf");
            break;
          case 10:
            push(kiln::sqrt(kiln::abs(x) + 0.5), std::sqrt(v.bound + 0.5), false, "sqrt(|x|+.5)");
            break;
          default:
            push(kiln::log(kiln::abs(x) + 0.5), std::log(v.bound + 0.5) + 1, false, "log(|x|+.5)");
            break;
        }
        return true;
      }
      case 1:
      case 2: {  // binary with broadcasting
        Value p = partner(s, float_of(x));
        switch (ri(0, 5)) {
          case 0:
            push(x + p.t, v.bound + p.bound, false, "add");
            break;
          case 1:
            push(p.t - x, v.bound + p.bound, false, "sub");
            break;
          case 2:
            push(x * p.t, v.bound * p.bound, false, "mul");
            break;
          case 3:
            push(x / (kiln::abs(p.t) + 0.5), v.bound * 2, false, "div");
            break;
          case 4:
            push(kiln::maximum(x, p.t), std::max(v.bound, p.bound), v.exact && p.exact, "maximum");
            break;
          default:
            push(kiln::minimum(p.t, x), std::max(v.bound, p.bound), v.exact && p.exact, "minimum");
            break;
        }
        return true;
      }
      case 3: {  // scalar ops and where/clip
        switch (ri(0, 3)) {
          case 0:
            push(x * 0.75 + 0.25, v.bound * 0.75 + 0.25, false, "axpb");
            break;
          case 1:
            push(kiln::clip(x, -1.0, 1.5), 1.5, v.exact, "clip");
            break;
          case 2: {
            // The condition compares an exact value only.
            Value* c = nullptr;
            for (auto& q : pool_)
              if (q.exact && kiln::is_floating(q.t.dtype()) && shape_of(q.t) == s) c = &q;
            if (!c) return false;
            Value p = partner(s, float_of(x));
            push(kiln::where(c->t > 0.0, x, p.t), std::max(v.bound, p.bound), false, "where");
            break;
          }
          default: {
            if (!v.exact) return false;
            push(kiln::where(x <= -0.5, x * 2.0, kiln::abs(x)).astype(float_of(x)), v.bound * 2,
                 false, "where(x<=-.5)");
            break;
          }
        }
        return true;
      }
      case 4:
      case 5: {  // reductions
        if (nd == 0) return false;
        std::vector<int> axes;
        for (int a = 0; a < nd; ++a)
          if (coin()) axes.push_back(coin() ? a : a - nd);
        if (axes.empty()) axes.push_back(static_cast<int>(ri(0, nd - 1)));
        bool keep = coin();
        double k = 1;
        for (int a : axes) k *= static_cast<double>(s[static_cast<size_t>(a < 0 ? a + nd : a)]);
        if (k == 0) return false;
        switch (ri(0, 3)) {
          case 0:
            push(x.sum(axes, keep), v.bound * k, false, "sum");
            scale_ += k;
            break;
          case 1:
            push(x.mean(axes, keep), v.bound, false, "mean");
            scale_ += std::sqrt(k);
            break;
          case 2:
            push(x.max(axes, keep), v.bound, v.exact, "max");
            break;
          default:
            push(kiln::min(x, axes, keep), v.bound, v.exact, "min");
            break;
        }
        return true;
      }
      case 6:
      case 7: {  // views
        switch (ri(0, 4)) {
          case 0: {
            if (nd < 2) return false;
            std::vector<int64_t> perm(static_cast<size_t>(nd));
            std::iota(perm.begin(), perm.end(), int64_t{0});
            std::shuffle(perm.begin(), perm.end(), rng_);
            push(x.transpose(perm), v.bound, v.exact, "transpose");
            break;
          }
          case 1: {
            if (nd == 0) return false;
            std::vector<Index> idx;
            for (int d = 0; d < nd; ++d) {
              int64_t n = s[static_cast<size_t>(d)];
              switch (ri(0, 3)) {
                case 0:
                  idx.push_back(Index::slice());
                  break;
                case 1:
                  idx.push_back(Index::slice(ri(0, n), {}, ri(1, 3)));
                  break;
                case 2:
                  idx.push_back(Index::slice({}, {}, -ri(1, 2)));
                  break;
                default:
                  if (n > 1 && d > 0)
                    idx.push_back(Index::at(ri(-n, n - 1)));
                  else
                    idx.push_back(Index::slice(0, std::max<int64_t>(1, n - 1)));
                  break;
              }
            }
            Tensor r = x.index(idx);
            if (numel_of(shape_of(r)) == 0) return false;
            push(r, v.bound, v.exact, "slice");
            break;
          }
          case 2: {  // reshape: merge the last two dims, or split a dim
            if (nd >= 2 && coin()) {
              std::vector<int64_t> t(s.begin(), s.end() - 2);
              t.push_back(s[static_cast<size_t>(nd - 2)] * s[static_cast<size_t>(nd - 1)]);
              push(x.reshape(t), v.bound, v.exact, "reshape merge");
            } else {
              std::vector<int64_t> t = s;
              t.insert(t.begin() + static_cast<std::ptrdiff_t>(ri(0, nd)), 1);
              push(kiln::reshape(x, t), v.bound, v.exact, "reshape add 1");
            }
            break;
          }
          case 3: {  // new axis + broadcast_to
            if (nd >= 4) return false;
            std::vector<int64_t> t = s;
            t.insert(t.begin(), ri(1, 3));
            push(kiln::broadcast_to(x, t), v.bound, v.exact, "broadcast_to");
            break;
          }
          default: {
            if (nd == 0) return false;
            push(x.index({Index::ellipsis(), Index::new_axis()}).reshape(s), v.bound, v.exact,
                 "x[..., None] reshaped");
            break;
          }
        }
        return true;
      }
      case 8: {  // matmul with a pool value or a constant of matching K
        if (nd == 0 || nd > 3) return false;
        int64_t k = s.back();
        if (k > 65) return false;
        std::vector<size_t> ok;
        for (size_t i = 0; i < pool_.size(); ++i) {
          auto o = shape_of(pool_[i].t);
          if (!kiln::is_floating(pool_[i].t.dtype())) continue;
          // A matrix, or (x being one) a vector: W @ v.
          if ((o.size() >= 2 && o.size() <= 3 && o[o.size() - 2] == k &&
               (o.size() == 2 || nd <= 2 || o[0] == s[0] || o[0] == 1 || s[0] == 1 || nd < 3)) ||
              (o.size() == 1 && o[0] == k && nd >= 2))
            ok.push_back(i);
        }
        Value b;
        if (!ok.empty() && coin(3) == false) {
          b = pool_[pick(rng_, ok)];
        } else {
          std::vector<int64_t> bs = {k, random_dim(rng_, false, 17)};
          if (nd >= 2 && coin(4)) bs.pop_back();  // W @ v
          b = {random_constant(bs, float_of(x)), 2, true, false};
        }
        Tensor r;
        try {
          r = kiln::matmul(x, b.t);
        } catch (const kiln::ShapeError&) {
          return false;  // batch dims that do not broadcast
        }
        if (numel_of(shape_of(r)) > 20000) return false;
        const double rb = v.bound * b.bound * static_cast<double>(k);
        scale_ += static_cast<double>(k);
        if (coin(4)) {
          // A gate: act(x @ b) * (x @ c), c a constant like b (GLU feed-forward layers).
          Tensor u = kiln::matmul(x, random_constant(shape_of(b.t), float_of(x)));
          const double ub = v.bound * 2 * static_cast<double>(k);
          switch (ri(0, 3)) {
            case 0:
              push(kiln::silu(r) * u, rb * ub, false, "silu gate");
              break;
            case 1:
              push(kiln::gelu(r) * u, rb * ub, false, "gelu gate");
              break;
            case 2:
              push(kiln::relu(r) * u, rb * ub, false, "relu gate");
              break;
            default:
              push(r * u, rb * ub, false, "gate");
              break;
          }
          scale_ += static_cast<double>(k);
          return true;
        }
        push(r, rb, false, "matmul");
        return true;
      }
      case 9: {  // concat with itself, a compatible pool value or a constant
        if (nd == 0) return false;
        int axis = static_cast<int>(ri(-nd, nd - 1));
        size_t ax = static_cast<size_t>(axis < 0 ? axis + nd : axis);
        std::vector<Tensor> parts = {x};
        double bound = v.bound;
        bool exact = v.exact;
        for (size_t i = 0; i < pool_.size(); ++i) {
          auto o = shape_of(pool_[i].t);
          if (o.size() != s.size() || !kiln::is_floating(pool_[i].t.dtype())) continue;
          bool same = true;
          for (size_t d = 0; d < s.size(); ++d) same = same && (d == ax || o[d] == s[d]);
          if (same && coin()) {
            parts.push_back(pool_[i].t);
            bound = std::max(bound, pool_[i].bound);
            exact = exact && pool_[i].exact;
            if (parts.size() == 3) break;
          }
        }
        if (parts.size() == 1) {
          std::vector<int64_t> cs = s;
          cs[ax] = ri(1, 3);
          parts.push_back(random_constant(cs, float_of(x)));
        }
        Tensor r = kiln::concatenate(parts, axis);
        if (numel_of(shape_of(r)) > 20000) return false;
        push(r, bound, exact, "concatenate");
        return true;
      }
      case 10: {  // casts
        DType t = x.dtype();
        if (v.exact) {
          switch (ri(0, 4)) {
            case 0:
              push(x.astype(DType::f64), v.bound, true, "astype f64");
              break;
            case 1:
              push(x.astype(DType::f16), v.bound, true, "astype f16");
              break;
            case 2:
              push(x.astype(DType::bf16), v.bound, true, "astype bf16");
              break;
            case 3:
              push(x.astype(DType::i32), v.bound, true, "astype i32");
              break;
            default:
              push((x * 4.0).astype(DType::i8), 4 * v.bound + 1, true, "(4x) astype i8");
              break;
          }
        } else {
          // Only widening casts of computed values.
          if (t == DType::f64) return false;
          push(x.astype(t == DType::f32 ? DType::f64 : DType::f32), v.bound, false, "astype wider");
        }
        return true;
      }
      case 11: {  // composites
        if (nd == 0) return false;
        int axis = coin() ? -1 : static_cast<int>(ri(0, nd - 1));
        double k = static_cast<double>(s[static_cast<size_t>(axis < 0 ? nd - 1 : axis)]);
        switch (ri(0, 3)) {
          case 0:
            push(kiln::softmax(x, axis), 1, false, "softmax");
            break;
          case 1:
            push(kiln::log_softmax(x, axis), 2 * v.bound + std::log(k) + 1, false, "log_softmax");
            break;
          case 2:
            push(kiln::layer_norm(x, {}, {}, axis), std::sqrt(k) + 1, false, "layer_norm");
            break;
          default:
            push(kiln::rms_norm(x, {}, axis), std::sqrt(k) + 1, false, "rms_norm");
            break;
        }
        scale_ += std::sqrt(k) * 2;
        return true;
      }
      default: {  // combine two pool values of the same shape (no broadcast), e.g. residuals
        for (size_t i = pool_.size(); i-- > 0;) {
          if (i == vi || shape_of(pool_[i].t) != s || !kiln::is_floating(pool_[i].t.dtype()))
            continue;
          const Value o = pool_[i];
          push(x * 0.5 + o.t * 0.5, (v.bound + o.bound) / 2 + 1, false, "average");
          return true;
        }
        return false;
      }
    }
  }
};

uint64_t env_seed() {
  const char* s = std::getenv("KILN_RANDOM_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 0;
}

}  // namespace

TEST_CASE("jit random programs: 250 seeded random graphs against the interpreter",
          "[jit][random]" KILN_NEEDS_LLVM) {
  const uint64_t only = env_seed();
  const uint64_t first = only ? only : 1;
  const uint64_t count = only ? 1 : 250;
  int failures = 0;
  double max_numel = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    Rng rng(seed * 7919 + 17);
    const int num_ops = static_cast<int>(uniform_int(rng, 3, 20));
    // Inputs: 1 to 4 arrays whose shapes share a small set of dims, so broadcasts and matmul
    // operands line up; dtypes mostly float32.
    std::vector<int64_t> dims = {random_dim(rng, false, 17), random_dim(rng, false, 17),
                                 random_dim(rng, false, 33), 1};
    const int n_in = static_cast<int>(uniform_int(rng, 1, 4));
    DType prog_dtype = uniform_int(rng, 0, 5) == 0 ? pick(rng, float_dtypes()) : DType::f32;
    std::vector<TestArray> inputs;
    for (int i = 0; i < n_in; ++i) {
      std::vector<int64_t> s(static_cast<size_t>(uniform_int(rng, 1, 3)));
      for (auto& d : s) d = pick(rng, dims);
      DType t = uniform_int(rng, 0, 6) == 0 ? pick(rng, float_dtypes()) : prog_dtype;
      inputs.push_back(make_array(rng, s, t, pick(rng, all_layouts())));
    }
    auto gen = std::make_shared<Generator>(seed, num_ops);
    // The generator is re-seeded on each trace so that both traces build the same program.
    kiln::TraceFn body = [gen, seed, num_ops](const std::vector<Tensor>& in) {
      *gen = Generator(seed, num_ops);
      return gen->run(in);
    };
    kiln::Function f(body, n_in);
    // Trace once here for the tolerance scale (the generator records it).
    kiln::ir::Graph g = trace_graph(body, arrays_of(inputs));
    // Error grows with the reductions' sizes and the chain length; the tolerance is that of the
    // least precise float dtype anywhere in the program. (kiln rounds a float16/bfloat16 value
    // where the oracle does: at casts and output stores, not between kernels; with that fixed,
    // the float16/bfloat16 programs of seeds 1-3000 pass at those dtypes' own absolute
    // tolerances, so these are no longer widened.)
    double scale = 1 + std::sqrt(gen->tol_scale()) + num_ops / 2.0;
    Tol tol = tol_for(DType::f64, scale);
    for (const auto& n : g.topo_order()) {
      if (!kiln::is_floating(n->dtype)) continue;
      Tol t = tol_for(n->dtype, scale);
      tol.rtol = std::max(tol.rtol, t.rtol);
      tol.atol = std::max(tol.atol, t.atol);
    }
    std::string label =
        "random program seed " + std::to_string(seed) + " (" + std::to_string(num_ops) +
        " ops; rerun with KILN_RANDOM_SEED=" + std::to_string(seed) + ")\nsteps: " + gen->log();
    bool ok = check_traced(body, f, inputs, {.tol_scale = scale, .label = label, .tol = tol});
    if (!ok && ++failures >= 10) {
      FAIL("stopping after 10 failing programs");
    }
    for (const auto& t : inputs)
      max_numel = std::max(max_numel, static_cast<double>(t.array.numel()));
  }
  CHECK(failures == 0);
}
