// Symbolic variants op by op, against the reference interpreter. Each case makes one Function with
// dynamic=symbolic (or per_arg where a dim must stay concrete: conv2d's spatial dims, reshapes and
// concatenations along the other dims), calls it on a sequence of extents for the dynamic dims
// (multiples of 16 first, so both the "%16" and the general variant are compiled; then 1 and 0,
// which take exact variants) in several layouts, and checks every result. A small model of the
// shape policy (ShapePolicy + VariantGuard, rewritten here from their documented rules) says how
// many variants those calls need; the Function must compile exactly that many, with no dim "kept
// exact": the symbolic variants served the calls. The last cases are the ops that cannot take a
// symbolic extent: they must give right results through exact variants, with the reason counted.
#include "jit_test_util.h"

#include <kiln/kiln.h>

#include <functional>
#include <limits>
#include <map>
#include <set>

using namespace jt;
using kiln::DynamicMode;
using kiln::Index;
using kiln::Options;
using kiln::Tensor;

namespace {

constexpr int64_t kMultiple = 16;  // ir::kSymbolMultiple

Options symbolic_mode() {
  Options o;
  o.dynamic = DynamicMode::symbolic;
  o.max_variants = 64;  // the layouts multiply the variants; the bound is not what is tested here
  return o;
}

Options per_arg_mode(std::map<int, std::vector<int>> dims) {
  Options o;
  o.dynamic = DynamicMode::per_arg;
  o.dynamic_dims = std::move(dims);
  o.max_variants = 64;
  return o;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}
int64_t count_containing(const std::vector<std::string>& v, const std::string& needle) {
  int64_t n = 0;
  for (const auto& s : v) n += s.find(needle) != std::string::npos;
  return n;
}
std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

bool aligned64(const Array& a) { return (reinterpret_cast<uintptr_t>(a.data()) & 63) == 0; }

// The shape policy's variants for a sequence of calls (symbolic and per_arg modes, no pinning):
// a call no variant serves compiles one whose dims of extent >= 2 that the mode makes dynamic are
// symbols (equal extents share one), a symbol knowing "multiple of 16" when every extent seen by
// all of its dims at the calls that compiled was one; each variant also fixes dtype, contiguity
// and 64-byte alignment per argument.
class VariantModel {
 public:
  explicit VariantModel(const Options& o) : options_(o) {}

  void call(const std::vector<Array>& args) {
    for (const Guard& g : guards_)
      if (binds(g, args)) return;
    guards_.push_back(decide(args));
  }
  int64_t variants() const { return static_cast<int64_t>(guards_.size()); }
  std::string describe() const {
    std::string s;
    for (const Guard& g : guards_) s += "\n  " + g.str();
    return s;
  }

 private:
  struct Arg {
    DType dtype;
    bool contiguous, aligned;
    std::vector<int64_t> dims;  // >= 0: exact extent; < 0: symbol -1 - d
  };
  struct Guard {
    std::vector<Arg> args;
    std::vector<bool> multiple;  // per symbol
    std::string str() const {
      std::string s;
      for (const Arg& a : args) {
        s += dt(a.dtype) + "[";
        for (size_t d = 0; d < a.dims.size(); ++d)
          s += (d ? "," : "") +
               (a.dims[d] >= 0 ? std::to_string(a.dims[d]) : "s" + std::to_string(-1 - a.dims[d]));
        s += "]";
        if (!a.contiguous) s += ":strided";
        if (!a.aligned) s += ":unaligned";
        s += " ";
      }
      for (size_t k = 0; k < multiple.size(); ++k)
        s += "s" + std::to_string(k) + (multiple[k] ? ">=2%16 " : ">=2 ");
      return s;
    }
  };

  bool wants(size_t arg, size_t dim, size_t rank) const {
    if (options_.dynamic == DynamicMode::symbolic) return true;
    if (options_.dynamic != DynamicMode::per_arg) return false;
    auto it = options_.dynamic_dims.find(static_cast<int>(arg));
    if (it == options_.dynamic_dims.end()) return false;
    for (int d : it->second)
      if ((d < 0 ? d + static_cast<int>(rank) : d) == static_cast<int>(dim)) return true;
    return false;
  }

  static bool binds(const Guard& g, const std::vector<Array>& args) {
    if (g.args.size() != args.size()) return false;
    std::vector<int64_t> bound(g.multiple.size(), -1);
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& ga = g.args[i];
      const auto& shape = args[i].shape();
      if (ga.dtype != args[i].dtype() || ga.dims.size() != shape.size()) return false;
      if (ga.contiguous != args[i].is_contiguous() || ga.aligned != aligned64(args[i]))
        return false;
      for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t v = shape[d];
        if (ga.dims[d] >= 0) {
          if (ga.dims[d] != v) return false;
          continue;
        }
        const size_t s = static_cast<size_t>(-1 - ga.dims[d]);
        if (bound[s] < 0) {
          if (v < 2 || (g.multiple[s] && v % kMultiple != 0)) return false;
          bound[s] = v;
        } else if (bound[s] != v) {
          return false;
        }
      }
    }
    return true;
  }

  // Only calls that compile update the per-dim history (the policy decides on misses only).
  Guard decide(const std::vector<Array>& args) {
    Guard g;
    std::map<int64_t, size_t> symbol_of_extent;
    if (all_multiple_.size() < args.size()) all_multiple_.resize(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& shape = args[i].shape();
      auto& am = all_multiple_[i];
      if (am.size() != shape.size()) am.assign(shape.size(), true);
      Arg a{args[i].dtype(), args[i].is_contiguous(), aligned64(args[i]), {}};
      for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t v = shape[d];
        am[d] = am[d] && v % kMultiple == 0;
        if (v < 2 || !wants(i, d, shape.size())) {
          a.dims.push_back(v);
          continue;
        }
        auto [it, fresh] = symbol_of_extent.emplace(v, g.multiple.size());
        if (fresh) g.multiple.push_back(true);
        g.multiple[it->second] = g.multiple[it->second] && am[d];
        a.dims.push_back(-1 - static_cast<int64_t>(it->second));
      }
      g.args.push_back(std::move(a));
    }
    return g;
  }

  Options options_;
  std::vector<std::vector<bool>> all_multiple_;
  std::vector<Guard> guards_;
};

std::string layouts_str(const std::vector<Layout>& ls) {
  std::string s;
  for (Layout l : ls) s += std::string(s.empty() ? "" : ",") + layout_name(l);
  return s;
}

// The layout of argument i in a pattern (the last one repeats).
Layout lay(const std::vector<Layout>& p, size_t i) { return p[std::min(i, p.size() - 1)]; }

// One Function under test, its body (traced again for the reference) and the model of its
// variants.
template <typename F>
class DynCase {
 public:
  DynCase(std::string name, F body, Options o)
      : name_(std::move(name)), body_(body), f_(kiln::jit(body, o)), model_(o) {}

  void run(const std::vector<TestArray>& in, double tol_scale, const std::string& what,
           std::optional<Tol> tol = std::nullopt) {
    CheckOptions opt;
    opt.function = &f_;
    opt.tol_scale = tol_scale;
    opt.tol = tol;
    opt.label = name_ + ": " + what;
    CHECK(check_against_reference(body_, in, opt));
    model_.call(arrays_of(in));
    ++calls_;
  }

  // The symbolic variants served the calls: exactly the variants the policy calls for, none kept
  // exact, at least one with a symbol, and fewer compiles than calls.
  void expect_symbolic() const {
    kiln::Stats st = f_.stats();
    INFO(name_ << "\nrecompile reasons:" << joined(st.recompile_reasons)
               << "\nvariants the policy calls for:" << model_.describe());
    CHECK(st.calls == calls_);
    CHECK_FALSE(any_contains(st.recompile_reasons, "kept exact"));
    CHECK(st.compiles == model_.variants());
    CHECK(st.variants == st.compiles);
    CHECK(st.variant_limit_hits == 0);
    CHECK(any_contains(st.recompile_reasons, ">=2"));
    CHECK(st.compiles < calls_);
  }

  // The program cannot take a dim symbolic: dim `dim` of argument `arg` was kept exact (reported
  // once), and every distinct call shape took its own exact variant.
  void expect_kept_exact(int arg, int dim, int64_t distinct_calls) const {
    kiln::Stats st = f_.stats();
    INFO(name_ << "\nrecompile reasons:" << joined(st.recompile_reasons));
    CHECK(st.calls == calls_);
    const std::string what = "arg " + std::to_string(arg) + " dim " + std::to_string(dim) +
                             ": kept exact, the program cannot take it symbolic";
    CHECK(count_containing(st.recompile_reasons, what) == 1);
    CHECK(st.compiles == distinct_calls);
    CHECK(st.variants == st.compiles);
    CHECK(st.variant_limit_hits == 0);
  }

  const kiln::Function& function() const { return f_; }

 private:
  std::string name_;
  F body_;
  kiln::Function f_;
  VariantModel model_;
  int64_t calls_ = 0;
};

template <typename F>
DynCase<F> dyn_case(std::string name, F body, Options o) {
  return DynCase<F>(std::move(name), std::move(body), std::move(o));
}

// Extents for the dynamic dims: multiples of 16 first (a variant assuming the multiple), then
// the rest (the general variant), then 1 and 0 (exact variants) where the case allows them.
const std::vector<int64_t> kSizes = {16, 48, 2, 3, 17, 33};
const std::vector<int64_t> kSizes1 = {16, 48, 2, 3, 17, 33, 1};
const std::vector<int64_t> kSizes10 = {16, 48, 2, 3, 17, 33, 1, 0};

std::string s_is(int64_t s) { return "s=" + std::to_string(s); }

// Layout patterns (per argument; the last repeats).
using Pattern = std::vector<Layout>;
const std::vector<Pattern>& unary_patterns() {
  static const std::vector<Pattern> v = {{Layout::contiguous}, {Layout::strided},
                                         {Layout::transposed}, {Layout::offset},
                                         {Layout::negative},   {Layout::zero_stride}};
  return v;
}
// Three of the patterns for case k: contiguous and two others, rotating.
std::vector<Pattern> rotate3(const std::vector<Pattern>& all, size_t k) {
  std::vector<Pattern> v = {all[0]};
  v.push_back(all[1 + k % (all.size() - 1)]);
  v.push_back(all[1 + (k + 2) % (all.size() - 1)]);
  return v;
}

double dbl(int64_t v) { return static_cast<double>(std::max<int64_t>(v, 1)); }

}  // namespace

// ------------------------------------------------------------------------------------------------
// Elementwise

TEST_CASE("dynamic ops: unary chains over every dtype", "[jit][dynamic_ops]") {
  uint64_t seed = 100;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    auto body = [t](Tensor x) {
      if (t == DType::boolean)  // the unary ops that take bool
        return std::vector<Tensor>{kiln::exp(x) + kiln::abs(x), kiln::sigmoid(x) * kiln::tanh(x),
                                   kiln::square(x), kiln::gelu(x) - kiln::silu(x),
                                   kiln::erf(x) + kiln::gelu(x, true)};
      return std::vector<Tensor>{
          kiln::exp(kiln::tanh(x)) * 0.5 + kiln::sigmoid(x),
          kiln::gelu(x) - kiln::silu(x) * kiln::erf(x),
          kiln::sqrt(kiln::abs(x) + 1.0) * kiln::rsqrt(kiln::square(x) + 1.0),
          kiln::log(kiln::abs(x) + 1.0) - kiln::relu(-x) + kiln::neg(x).abs(),
          kiln::gelu(x, true) * 2.0};
    };
    auto c = dyn_case("unary chain " + dt(t), body, symbolic_mode());
    for (const Pattern& p : rotate3(unary_patterns(), k++)) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 7}, t, lay(p, 0))}, 1, s_is(s) + " x[s,7] " + layouts_str(p));
      }
      for (int64_t s : kSizes) {
        Rng rng(++seed);
        c.run({make_array(rng, {5, s}, t, lay(p, 0), Values::wide)}, 1,
              s_is(s) + " x[5,s] " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: binary, where, compare and cast chains over every dtype, [n] bias",
          "[jit][dynamic_ops]") {
  uint64_t seed = 200;
  size_t k = 0;
  const std::vector<Pattern> patterns = {
      {Layout::contiguous},
      {Layout::strided, Layout::contiguous, Layout::negative, Layout::contiguous},
      {Layout::transposed, Layout::offset, Layout::strided, Layout::contiguous},
      {Layout::negative, Layout::zero_stride, Layout::offset, Layout::contiguous},
      {Layout::offset, Layout::transposed, Layout::contiguous, Layout::contiguous}};
  for (DType t : all_dtypes()) {
    // x, y: [m, n]; b: [n]; c: a 0-d tensor.
    auto body = [t](Tensor x, Tensor y, Tensor b, Tensor c) {
      std::vector<Tensor> out;
      if (t == DType::boolean) {
        out = {x + b,
               x * y,
               kiln::maximum(x, b),
               kiln::minimum(x, y),
               kiln::where(x, y, b),
               kiln::where(x != b, kiln::scalar(1.5, DType::f32), kiln::scalar(-2, DType::f32)),
               x < b,
               x == y,
               (x >= c) + (y <= b),
               x + 1.0};
      } else {
        out = {x + b * c,
               x * y - b,
               x / y,
               kiln::maximum(x, b),
               kiln::minimum(x, y),
               kiln::where(x > y, x, b),
               kiln::where(x < 0.5, x * 2.0 + 1.0, 3.0 - x),
               x < b,
               (x == y) + (x != b),
               x >= c};
        if (kiln::is_floating(t)) out.push_back(kiln::pow(y, x) - kiln::pow(x, 2.0));
      }
      // Casts to every dtype, then arithmetic in the target dtype.
      for (DType to : all_dtypes()) out.push_back(x.astype(to) + b.astype(to));
      return out;
    };
    auto c = dyn_case("binary chain " + dt(t), body, symbolic_mode());
    for (size_t pi = 0; pi < 3; ++pi) {
      const Pattern& p = patterns[pi == 0 ? 0 : 1 + (k + pi) % (patterns.size() - 1)];
      for (int64_t s : kSizes10) {  // symbolic rows
        Rng rng(++seed);
        c.run({make_array(rng, {s, 7}, t, lay(p, 0)),
               make_array(rng, {s, 7}, t, lay(p, 1), Values::positive),
               make_array(rng, {7}, t, lay(p, 2)), make_array(rng, {}, t, lay(p, 3))},
              1, s_is(s) + " m=s n=7 " + layouts_str(p));
      }
      for (int64_t s : kSizes1) {  // symbolic columns: the bias's extent is the symbol
        Rng rng(++seed);
        c.run({make_array(rng, {5, s}, t, lay(p, 0)),
               make_array(rng, {5, s}, t, lay(p, 1), Values::positive),
               make_array(rng, {s}, t, lay(p, 2)), make_array(rng, {}, t, lay(p, 3))},
              1, s_is(s) + " m=5 n=s " + layouts_str(p));
      }
    }
    ++k;
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: broadcasting [n] and [m, 1] against [m, n], mixed dtypes",
          "[jit][dynamic_ops]") {
  uint64_t seed = 300;
  auto body = [](Tensor x, Tensor col, Tensor row, Tensor i) {
    return std::vector<Tensor>{x * col + row, kiln::where(col > row, x, i), (x + i) * 0.25,
                               kiln::maximum(col, row)};
  };
  auto c = dyn_case("broadcast mixed", body, symbolic_mode());
  for (const Pattern& p : std::vector<Pattern>{
           {Layout::contiguous},
           {Layout::transposed, Layout::strided, Layout::negative, Layout::offset}}) {
    for (int64_t m : kSizes10) {
      for (int64_t n : {5, 16, 33}) {
        if (m == n) continue;
        Rng rng(++seed);
        c.run({make_array(rng, {m, n}, DType::f32, lay(p, 0)),
               make_array(rng, {m, 1}, DType::f16, lay(p, 1)),
               make_array(rng, {n}, DType::f64, lay(p, 2)),
               make_array(rng, {m, n}, DType::i32, lay(p, 3))},
              1, "m=" + std::to_string(m) + " n=" + std::to_string(n) + " " + layouts_str(p));
      }
    }
  }
  c.expect_symbolic();
}

// ------------------------------------------------------------------------------------------------
// Reductions and the row composites

TEST_CASE("dynamic ops: sum mean max min over symbolic and fixed axes, keepdims, negative axes",
          "[jit][dynamic_ops]") {
  uint64_t seed = 400;
  size_t k = 0;
  auto body = [](Tensor x, Tensor y) {  // x [s, 7], y [5, s, 3]
    return std::vector<Tensor>{
        x.sum(0),          x.sum(1),          x.sum(-1, true),  x.mean(0, true),
        x.mean(-1),        x.max(-2),         x.min(1, true),   kiln::max(x, 1),
        kiln::min(x, {-2}, true), x.sum(),    x.max(),          x.mean({0, 1}, true),
        y.sum(1),          y.mean({0, 2}),    y.min(-1),        y.max({-2, 0}, true),
        y.sum({1, 2}, true), y.min(0)};
  };
  // Sums and means only: these take extent 0 too.
  auto body0 = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{x.sum(0), x.sum(-1, true), x.mean(0),   x.mean(1, true),
                               x.sum(),  y.sum(1),        y.mean(-2), y.sum({0, 2}, true)};
  };
  const std::vector<Pattern> patterns = {{Layout::contiguous},
                                         {Layout::strided, Layout::transposed},
                                         {Layout::transposed, Layout::negative},
                                         {Layout::negative, Layout::offset},
                                         {Layout::offset, Layout::strided}};
  for (DType t : all_dtypes()) {
    // symbolic: every dim is a symbol (the fixed ones too); per_arg: only s is, 7, 5, 3 stay
    // concrete (a concrete reduction axis of a tensor with a symbolic dim).
    for (bool per_arg : {false, true}) {
      Options o = per_arg ? per_arg_mode({{0, {0}}, {1, {1}}}) : symbolic_mode();
      const std::string mode = per_arg ? " per_arg" : " symbolic";
      auto c = dyn_case("reductions " + dt(t) + mode, body, o);
      auto c0 = dyn_case("sum/mean with extent 0 " + dt(t) + mode, body0, o);
      for (size_t pi = 0; pi < 2; ++pi) {
        const Pattern& p = patterns[pi == 0 ? 0 : 1 + k++ % (patterns.size() - 1)];
        for (int64_t s : kSizes1) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {s, 7}, t, lay(p, 0)),
                                       make_array(rng, {5, s, 3}, t, lay(p, 1))};
          c.run(in, dbl(15 * s), s_is(s) + " " + layouts_str(p));
        }
        for (int64_t s : {0, 2, 17, 1, 32}) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {s, 7}, t, lay(p, 0)),
                                       make_array(rng, {5, s, 3}, t, lay(p, 1))};
          c0.run(in, dbl(15 * s), s_is(s) + " " + layouts_str(p));
        }
      }
      c.expect_symbolic();
      c0.expect_symbolic();
    }
  }
}

TEST_CASE("dynamic ops: softmax, log_softmax, layer_norm, rms_norm over symbolic and fixed rows",
          "[jit][dynamic_ops]") {
  uint64_t seed = 500;
  size_t k = 0;
  struct Op {
    const char* name;
    std::function<Tensor(Tensor, Tensor, Tensor, int)> fn;
  };
  const std::vector<Op> ops = {
      {"softmax", [](Tensor x, Tensor, Tensor, int ax) { return kiln::softmax(x, ax); }},
      {"log_softmax", [](Tensor x, Tensor, Tensor, int ax) { return kiln::log_softmax(x, ax); }},
      {"layer_norm",
       [](Tensor x, Tensor w, Tensor b, int ax) { return kiln::layer_norm(x, w, b, ax); }},
      {"layer_norm no params",
       [](Tensor x, Tensor, Tensor, int ax) { return kiln::layer_norm(x, Tensor(), Tensor(), ax); }},
      {"rms_norm", [](Tensor x, Tensor w, Tensor, int ax) { return kiln::rms_norm(x, w, ax); }},
      {"rms_norm no weight",
       [](Tensor x, Tensor, Tensor, int ax) { return kiln::rms_norm(x, Tensor(), ax); }},
  };
  const std::vector<Pattern> patterns = {{Layout::contiguous},
                                         {Layout::strided, Layout::contiguous, Layout::negative},
                                         {Layout::transposed, Layout::strided},
                                         {Layout::offset, Layout::negative, Layout::contiguous},
                                         {Layout::negative, Layout::offset}};
  for (DType t : float_dtypes()) {
    for (const Op& op : ops) {
      auto fn = op.fn;
      // Over the last axis (spelled -1 and 1), x [r, n] with w, b [n].
      auto last = [fn](Tensor x, Tensor w, Tensor b) {
        return std::vector<Tensor>{fn(x, w, b, -1)};
      };
      auto last1 = [fn](Tensor x, Tensor w, Tensor b) {
        return std::vector<Tensor>{fn(x, w, b, 1)};
      };
      const std::string name = std::string(op.name) + " " + dt(t);
      // 1. symbolic mode, the normalized (last) dim varies; the 5 rows are a symbol too.
      auto c1 = dyn_case(name + " over a symbolic last dim", last, symbolic_mode());
      // 2. per_arg, the rows vary and the last dim (24) stays concrete.
      auto c2 = dyn_case(name + " over a concrete last dim, symbolic rows", last1,
                         per_arg_mode({{0, {0}}}));
      // 3. symbolic mode, the rows vary (24 is a symbol of fixed extent).
      auto c3 = dyn_case(name + " symbolic rows", last, symbolic_mode());
      for (size_t pi = 0; pi < 2; ++pi) {
        const Pattern& p = patterns[pi == 0 ? 0 : 1 + k++ % (patterns.size() - 1)];
        for (int64_t n : kSizes1) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {5, n}, t, lay(p, 0), Values::wide),
                                       make_array(rng, {n}, t, lay(p, 1)),
                                       make_array(rng, {n}, t, lay(p, 2))};
          c1.run(in, std::max(4.0, std::sqrt(dbl(n))), "x[5,s] " + s_is(n) + " " + layouts_str(p));
        }
        for (int64_t r : kSizes10) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {r, 24}, t, lay(p, 0), Values::wide),
                                       make_array(rng, {24}, t, lay(p, 1)),
                                       make_array(rng, {24}, t, lay(p, 2))};
          c2.run(in, std::max(4.0, std::sqrt(24.0)), "x[s,24] " + s_is(r) + " " + layouts_str(p));
          c3.run(in, std::max(4.0, std::sqrt(24.0)), "x[s,24] " + s_is(r) + " " + layouts_str(p));
        }
      }
      c1.expect_symbolic();
      c2.expect_symbolic();
      c3.expect_symbolic();
    }
  }
}

TEST_CASE("dynamic ops: softmax and log_softmax over a symbolic leading axis (axis 0)",
          "[jit][dynamic_ops]") {
  uint64_t seed = 600;
  for (DType t : {DType::f32, DType::f64}) {
    auto body = [](Tensor x) {
      return std::vector<Tensor>{kiln::softmax(x, 0), kiln::log_softmax(x, -2)};
    };
    auto c = dyn_case("softmax axis 0 " + dt(t), body, per_arg_mode({{0, {0}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed}}) {
      for (int64_t s : kSizes1) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 9}, t, lay(p, 0), Values::wide)}, std::max(2.0, std::sqrt(dbl(s))),
              s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

// ------------------------------------------------------------------------------------------------
// matmul

namespace {
const std::vector<Pattern>& matmul_patterns() {
  static const std::vector<Pattern> v = {
      {Layout::contiguous},
      {Layout::strided, Layout::contiguous},
      {Layout::transposed, Layout::transposed},
      {Layout::offset, Layout::negative},
      {Layout::contiguous, Layout::transposed, Layout::strided}};
  return v;
}
}  // namespace

TEST_CASE("dynamic ops: matmul with symbolic M, K, N, all three, float32 and float64",
          "[jit][dynamic_ops]") {
  uint64_t seed = 700;
  auto body = [](Tensor x, Tensor w) { return kiln::matmul(x, w); };
  struct Dims {
    const char* name;
    std::map<int, std::vector<int>> per_arg;  // the dims that vary
    std::function<std::array<int64_t, 3>(int64_t)> mkn;
  };
  const std::vector<Dims> cases = {
      {"symbolic M", {{0, {0}}}, [](int64_t s) { return std::array<int64_t, 3>{s, 24, 20}; }},
      {"symbolic K", {{0, {1}}, {1, {0}}},
       [](int64_t s) { return std::array<int64_t, 3>{5, s, 20}; }},
      {"symbolic N", {{1, {1}}}, [](int64_t s) { return std::array<int64_t, 3>{5, 24, s}; }},
  };
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64}) {
    for (const Dims& d : cases) {
      // symbolic mode (the fixed dims are symbols too) and per_arg (they stay concrete).
      for (bool per_arg : {false, true}) {
        const std::string name = std::string(d.name) + " " + dt(t) + (per_arg ? " per_arg" : "");
        auto c = dyn_case(name, body, per_arg ? per_arg_mode(d.per_arg) : symbolic_mode());
        for (size_t pi = 0; pi < 2; ++pi) {
          const auto& all = matmul_patterns();
          const Pattern& p = all[pi == 0 ? 0 : 1 + k++ % (all.size() - 1)];
          for (int64_t s : kSizes10) {
            auto [m, kk, n] = d.mkn(s);
            Rng rng(++seed);
            c.run({make_array(rng, {m, kk}, t, lay(p, 0)), make_array(rng, {kk, n}, t, lay(p, 1))},
                  dbl(kk), s_is(s) + " " + layouts_str(p));
          }
        }
        c.expect_symbolic();
      }
    }
    // All three symbolic, never equal to each other in one call (equal extents share a symbol,
    // which is a different variant).
    auto c = dyn_case("symbolic M, K, N " + dt(t), body, symbolic_mode());
    const std::vector<std::array<int64_t, 3>> mkns = {
        {16, 32, 48}, {48, 16, 32}, {2, 3, 5}, {3, 17, 2}, {17, 33, 3}, {33, 2, 17},
        {1, 5, 7},    {5, 1, 7},    {7, 5, 1}, {0, 5, 3},  {4, 0, 3},   {3, 4, 0}};
    for (size_t pi = 0; pi < 3; ++pi) {
      const Pattern& p = matmul_patterns()[pi];
      for (auto [m, kk, n] : mkns) {
        Rng rng(++seed);
        c.run({make_array(rng, {m, kk}, t, lay(p, 0)), make_array(rng, {kk, n}, t, lay(p, 1))},
              dbl(kk),
              "m,k,n=" + std::to_string(m) + "," + std::to_string(kk) + "," + std::to_string(n) +
                  " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: batched matmul with a symbolic batch, broadcast weights",
          "[jit][dynamic_ops]") {
  uint64_t seed = 800;
  for (DType t : {DType::f32, DType::f64}) {
    auto batched = [](Tensor x, Tensor w) { return kiln::matmul(x, w); };
    auto c = dyn_case("batched matmul " + dt(t), batched, symbolic_mode());
    auto bcast = [](Tensor x, Tensor w, Tensor v) {
      return std::vector<Tensor>{kiln::matmul(x, w), kiln::matmul(x, v)};
    };
    auto cb = dyn_case("batched matmul, broadcast weight " + dt(t), bcast, symbolic_mode());
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::transposed},
                             Pattern{Layout::transposed, Layout::offset}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 4, 6}, t, lay(p, 0)), make_array(rng, {s, 6, 5}, t, lay(p, 1))},
              6, s_is(s) + " [s,4,6]@[s,6,5] " + layouts_str(p));
        cb.run({make_array(rng, {s, 4, 6}, t, lay(p, 0)), make_array(rng, {6, 5}, t, lay(p, 1)),
                make_array(rng, {6}, t, lay(p, 1))},
               6, s_is(s) + " [s,4,6]@[6,5] and @[6] " + layouts_str(p));
      }
      for (int64_t s : kSizes) {  // the rows vary too: [b, s, 6] with b = 3
        Rng rng(++seed);
        c.run({make_array(rng, {5, s, 6}, t, lay(p, 0)), make_array(rng, {5, 6, 7}, t, lay(p, 1))},
              6, s_is(s) + " [5,s,6]@[5,6,7] " + layouts_str(p));
      }
    }
    c.expect_symbolic();
    cb.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: matmul of a transposed operand (x.T @ w)", "[jit][dynamic_ops]") {
  uint64_t seed = 900;
  for (DType t : {DType::f32, DType::f64}) {
    auto body = [](Tensor x, Tensor w) {
      return std::vector<Tensor>{kiln::matmul(x.T(), w), kiln::matmul(w.T(), x)};
    };
    // x [12, s]: x.T is [s, 12]; w [12, 10]; w.T @ x is [10, s].
    auto c = dyn_case("x.T @ w " + dt(t), body, symbolic_mode());
    auto cp = dyn_case("x.T @ w " + dt(t) + " per_arg", body, per_arg_mode({{0, {1}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed},
                             Pattern{Layout::transposed, Layout::contiguous},
                             Pattern{Layout::strided, Layout::negative}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        std::vector<TestArray> in = {make_array(rng, {12, s}, t, lay(p, 0)),
                                     make_array(rng, {12, 10}, t, lay(p, 1))};
        c.run(in, 12, s_is(s) + " " + layouts_str(p));
        cp.run(in, 12, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
    cp.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: matmul + bias + gelu/relu/silu epilogues", "[jit][dynamic_ops]") {
  uint64_t seed = 1000;
  struct Epi {
    const char* name;
    std::function<Tensor(Tensor)> fn;
  };
  const std::vector<Epi> epis = {{"gelu", [](Tensor y) { return kiln::gelu(y); }},
                                 {"gelu_tanh", [](Tensor y) { return kiln::gelu(y, true); }},
                                 {"relu", [](Tensor y) { return kiln::relu(y); }},
                                 {"silu", [](Tensor y) { return kiln::silu(y); }}};
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64}) {
    for (const Epi& e : epis) {
      auto fn = e.fn;
      auto body = [fn](Tensor x, Tensor w, Tensor b) { return fn(kiln::matmul(x, w) + b); };
      const std::string name = std::string("matmul + bias + ") + e.name + " " + dt(t);
      auto c = dyn_case(name, body, symbolic_mode());
      auto cp = dyn_case(name + " per_arg", body, per_arg_mode({{0, {0}}}));
      for (size_t pi = 0; pi < 2; ++pi) {
        const auto& all = matmul_patterns();
        const Pattern& p = all[pi == 0 ? 0 : 1 + k++ % (all.size() - 1)];
        for (int64_t s : kSizes10) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {s, 24}, t, lay(p, 0)),
                                       make_array(rng, {24, 40}, t, lay(p, 1)),
                                       make_array(rng, {40}, t, lay(p, 2))};
          c.run(in, 24, s_is(s) + " " + layouts_str(p));
          cp.run(in, 24, s_is(s) + " " + layouts_str(p));
        }
      }
      c.expect_symbolic();
      cp.expect_symbolic();
    }
  }
}

TEST_CASE("dynamic ops: a transformer MLP block with symbolic tokens and hidden size",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1100;
  auto body = [](Tensor x, Tensor w1, Tensor b1, Tensor w2) {
    Tensor h = kiln::gelu(kiln::matmul(kiln::layer_norm(x), w1) + b1);
    return x + kiln::matmul(h, w2);
  };
  auto c = dyn_case("mlp block", body, symbolic_mode());
  for (int64_t d : {32, 24}) {
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, d}, DType::f32), make_array(rng, {d, 40}, DType::f32),
             make_array(rng, {40}, DType::f32), make_array(rng, {40, d}, DType::f32)},
            40, s_is(s) + " d=" + std::to_string(d));
    }
  }
  c.expect_symbolic();
}

// ------------------------------------------------------------------------------------------------
// Views

TEST_CASE("dynamic ops: transpose and permute", "[jit][dynamic_ops]") {
  uint64_t seed = 1200;
  for (DType t : {DType::f32, DType::i64, DType::boolean, DType::f16}) {
    auto body = [](Tensor x) {
      return std::vector<Tensor>{x.transpose({2, 0, 1}), x.T() * x.T(),
                                 kiln::transpose(x, {1, 0, 2}).sum(-1), x.transpose({0, 2, 1})};
    };
    auto c = dyn_case("permute " + dt(t), body, symbolic_mode());
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed},
                             Pattern{Layout::strided}, Pattern{Layout::negative}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 5, 7}, t, lay(p, 0))}, 7, s_is(s) + " [s,5,7] " + layouts_str(p));
      }
      for (int64_t s : kSizes) {
        Rng rng(++seed);
        c.run({make_array(rng, {4, 5, s}, t, lay(p, 0))}, dbl(s),
              s_is(s) + " [4,5,s] " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: reshape with -1 ([s,4,8] -> [-1,32] and back; [s] -> [-1,1])",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1300;
  for (DType t : {DType::f32, DType::i32}) {
    // per_arg: only s is a symbol (in symbolic mode 4 and 8 would be symbols as well, and 4 * 8
    // a product of symbols: see the fallback cases).
    auto body = [](Tensor x) {
      Tensor flat = x.reshape({-1, 32});
      return std::vector<Tensor>{flat * 2.0, (flat + 1.0).reshape({-1, 4, 8}) + x,
                                 x.reshape({-1, 2, 16}), kiln::reshape(x, {-1, 8, 4}).sum(-1),
                                 x.reshape({-1, 32, 1}), flat.reshape({1, -1, 4, 8})};
    };
    auto c = dyn_case("reshape -1 " + dt(t), body, per_arg_mode({{0, {0}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided},
                             Pattern{Layout::transposed}, Pattern{Layout::offset}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 4, 8}, t, lay(p, 0))}, 4, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
  // A regrouping around the symbol: [s, 4, 8] -> [2, s, 16] keeps one symbol and the concrete
  // product, but moves the symbol inward: a row-major reshape, not a relabelling of dims.
  {
    auto body = [](Tensor x) { return x.reshape({2, -1, 16}) + 0.0f; };
    auto c = dyn_case("reshape [s,4,8] -> [2,-1,16]", body, per_arg_mode({{0, {0}}}));
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 4, 8}, DType::f32)}, 1, s_is(s));
    }
    c.expect_symbolic();
  }
  // symbolic mode: a 1-d tensor gains unit dims (its one symbol stays a dim of its own).
  {
    auto body = [](Tensor x, Tensor y) {
      return std::vector<Tensor>{x.reshape({-1, 1}) * y.reshape({1, -1}), x.reshape({1, -1, 1}),
                                 (x.reshape({-1, 1}) + 1.0f).reshape({-1})};
    };
    auto c = dyn_case("reshape [s] -> [-1,1]", body, symbolic_mode());
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::negative, Layout::strided}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s}, DType::f32, lay(p, 0)), make_array(rng, {7}, DType::f32, lay(p, 1))},
              1, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: index 0 and 1 on a symbolic axis, full slices, new axes, ellipsis",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1400;
  for (DType t : {DType::f32, DType::i8, DType::boolean}) {
    auto body = [](Tensor x) {  // x [s, 5, 7]: every dim a symbol
      return std::vector<Tensor>{
          x.index({Index::at(0)}),
          x.index({Index::at(1)}),
          x.index({Index::slice(), Index::at(1)}),
          x.index({Index::ellipsis(), Index::at(0)}),
          x.index({Index::at(1), Index::slice(), Index::at(0)}),
          x.index({Index::slice(), Index::new_axis()}),
          x.index({Index::new_axis(), Index::ellipsis(), Index::new_axis()}),
          x.index({Index::slice(), Index::slice(), Index::slice()}),
          x.index({Index::slice(0, std::nullopt, 1), Index::ellipsis()}),
          x.index({Index::at(0)}) == x.index({Index::at(1)})};
    };
    auto c = dyn_case("index " + dt(t), body, symbolic_mode());
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided},
                             Pattern{Layout::transposed}, Pattern{Layout::negative},
                             Pattern{Layout::offset}}) {
      for (int64_t s : kSizes) {  // index 1 needs an extent of at least 2
        Rng rng(++seed);
        c.run({make_array(rng, {s, 5, 7}, t, lay(p, 0))}, 1, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: broadcast_to with symbolic dims (-1) and new leading dims",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1500;
  // The target shape comes from the traced shapes: a symbolic dim reports -1, which broadcast_to
  // takes as "x's own symbolic dim here"; the reference trace sees the concrete extents.
  auto body = [](Tensor x, Tensor b) {  // x [s, 1], b [n]
    std::vector<int64_t> xs = x.shape(), bs = b.shape();
    return std::vector<Tensor>{kiln::broadcast_to(x, {xs[0], 6}),
                               kiln::broadcast_to(x, {2, xs[0], 6}) * 2.0f,
                               kiln::broadcast_to(b, {3, bs[0]}),
                               kiln::broadcast_to(b, {2, 1, bs[0]}) + 1.0f};
  };
  auto c = dyn_case("broadcast_to", body, symbolic_mode());
  for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::negative},
                           Pattern{Layout::offset, Layout::zero_stride}}) {
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 1}, DType::f32, lay(p, 0)),
             make_array(rng, {s == 2 ? 5 : 2}, DType::f32, lay(p, 1))},
            1, s_is(s) + " " + layouts_str(p));
    }
    for (int64_t n : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {4, 1}, DType::f32, lay(p, 0)),
             make_array(rng, {n}, DType::f32, lay(p, 1))},
            1, "n=" + std::to_string(n) + " " + layouts_str(p));
    }
  }
  c.expect_symbolic();
}

// ------------------------------------------------------------------------------------------------
// concatenate, conv2d

TEST_CASE("dynamic ops: concatenate along a concrete axis of symbolic-row tensors",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1600;
  for (DType t : {DType::f32, DType::i32, DType::boolean, DType::bf16}) {
    auto body = [](Tensor x, Tensor y, Tensor z) {  // [s,5], [s,7] (other dtype), [s,1]
      return std::vector<Tensor>{kiln::concatenate({x, y}, 1), kiln::concatenate({x, z, x}, -1),
                                 kiln::concatenate({y, y}, 1) * 2.0,
                                 kiln::concatenate({z, x}, 1).sum(-1)};
    };
    // per_arg: the rows are symbols, the column counts concrete.
    auto c = dyn_case("concatenate axis 1 " + dt(t), body,
                      per_arg_mode({{0, {0}}, {1, {0}}, {2, {0}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous},
                             Pattern{Layout::strided, Layout::transposed, Layout::negative},
                             Pattern{Layout::offset, Layout::contiguous}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 5}, t, lay(p, 0)), make_array(rng, {s, 7}, DType::i8, lay(p, 1)),
               make_array(rng, {s, 1}, t, lay(p, 2))},
              13, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
  // symbolic mode: every dim of extent >= 2 is a symbol, so only an axis of extent 1 per piece is
  // concrete; concatenating those is expressible.
  auto body = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{kiln::concatenate({x, y}, 1), kiln::concatenate({x, y, x}, -1) + 1.0f};
  };
  auto c = dyn_case("concatenate unit columns, symbolic mode", body, symbolic_mode());
  for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::offset}}) {
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 1}, DType::f32, lay(p, 0)),
             make_array(rng, {s, 1}, DType::f32, lay(p, 1))},
            1, s_is(s) + " " + layouts_str(p));
    }
  }
  c.expect_symbolic();
}

TEST_CASE("dynamic ops: conv2d with a symbolic batch (float32)", "[jit][dynamic_ops]") {
  uint64_t seed = 1700;
  struct Conv {
    const char* name;
    std::vector<int64_t> x, w;  // x without its batch dim
    kiln::Conv2dParams p;
  };
  kiln::Conv2dParams pad1;
  pad1.padding[0] = pad1.padding[1] = 1;
  kiln::Conv2dParams strided;
  strided.stride[0] = strided.stride[1] = 2;
  strided.groups = 2;
  kiln::Conv2dParams dilated;
  dilated.dilation[0] = 2;
  dilated.padding[1] = 1;
  const std::vector<Conv> convs = {{"3x3 pad 1", {3, 6, 6}, {4, 3, 3, 3}, pad1},
                                   {"stride 2 groups 2", {4, 7, 7}, {6, 2, 3, 3}, strided},
                                   {"dilation 2", {2, 7, 5}, {3, 2, 3, 2}, dilated}};
  for (const Conv& cv : convs) {
    kiln::Conv2dParams p = cv.p;
    auto body = [p](Tensor x, Tensor w, Tensor b) {
      return std::vector<Tensor>{kiln::conv2d(x, w, b, p), kiln::relu(kiln::conv2d(x, w, Tensor(), p))};
    };
    auto c = dyn_case(std::string("conv2d ") + cv.name, body, per_arg_mode({{0, {0}}}));
    const double kk = static_cast<double>(cv.w[1] * cv.w[2] * cv.w[3]);
    for (const Pattern& pat : {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::contiguous},
                               Pattern{Layout::transposed, Layout::negative}}) {
      for (int64_t s : {16, 32, 2, 3, 17, 1, 0}) {
        Rng rng(++seed);
        std::vector<int64_t> xs = {s};
        xs.insert(xs.end(), cv.x.begin(), cv.x.end());
        c.run({make_array(rng, xs, DType::f32, lay(pat, 0)),
               make_array(rng, cv.w, DType::f32, lay(pat, 1)),
               make_array(rng, {cv.w[0]}, DType::f32, lay(pat, 2))},
              kk, s_is(s) + " " + layouts_str(pat));
      }
    }
    c.expect_symbolic();
  }
}

// ------------------------------------------------------------------------------------------------
// The fallback: ops that cannot take a symbolic extent keep the dims exact, and say so.

TEST_CASE("dynamic ops: a bounded slice on a symbolic axis takes exact variants",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1800;
  auto body = [](Tensor x) {
    return std::vector<Tensor>{x.index({Index::slice(1, std::nullopt)}) * 3.0f,
                               x.index({Index::slice(std::nullopt, std::nullopt, 2)}),
                               x.index({Index::slice(std::nullopt, -1)}).sum(0)};
  };
  auto c = dyn_case("bounded slice", body, symbolic_mode());
  const std::vector<int64_t> sizes = {4, 16, 5, 33, 4, 2, 16, 1};
  for (int64_t s : sizes) {
    Rng rng(++seed);
    c.run({make_array(rng, {s, 3}, DType::f32)}, dbl(s), s_is(s));
  }
  c.expect_kept_exact(0, 0, static_cast<int64_t>(std::set<int64_t>(sizes.begin(), sizes.end()).size()));
}

TEST_CASE("dynamic ops: index -1 on a symbolic axis takes exact variants", "[jit][dynamic_ops]") {
  uint64_t seed = 1850;
  auto body = [](Tensor x) { return x.index({Index::at(-1)}) + 1.0f; };
  auto c = dyn_case("index -1", body, symbolic_mode());
  const std::vector<int64_t> sizes = {4, 16, 5, 4};
  for (int64_t s : sizes) {
    Rng rng(++seed);
    c.run({make_array(rng, {s, 3}, DType::f32)}, 1, s_is(s));
  }
  c.expect_kept_exact(0, 0, 3);
}

TEST_CASE("dynamic ops: concatenate along a symbolic axis takes exact variants",
          "[jit][dynamic_ops]") {
  uint64_t seed = 1900;
  auto body = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{kiln::concatenate({x, y}, 0), kiln::concatenate({y, x, y}, 0) * 2.0f};
  };
  auto c = dyn_case("concatenate axis 0", body, symbolic_mode());
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{4, 5}, {16, 2}, {5, 4}, {4, 5}, {17, 17}};
  for (auto [a, b] : sizes) {
    Rng rng(++seed);
    c.run({make_array(rng, {a, 3}, DType::f32), make_array(rng, {b, 3}, DType::f32)}, 1,
          "rows " + std::to_string(a) + " and " + std::to_string(b));
  }
  c.expect_kept_exact(0, 0, 4);
  // The other piece's rows were symbolic too and are kept exact as well.
  CHECK(any_contains(c.function().stats().recompile_reasons, "arg 1 dim 0: kept exact"));
}

TEST_CASE("dynamic ops: reshapes merging symbols and conv2d spatial dims take exact variants",
          "[jit][dynamic_ops]") {
  uint64_t seed = 2000;
  {
    // symbolic mode: 4 and 8 are symbols too, so [-1, 32] would need their product.
    auto body = [](Tensor x) { return x.reshape({-1, 32}) * 2.0f; };
    auto c = dyn_case("reshape merging symbols", body, symbolic_mode());
    for (int64_t s : {3, 16, 5, 3}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 4, 8}, DType::f32)}, 1, s_is(s));
    }
    c.expect_kept_exact(0, 1, 3);
  }
  {
    auto body = [](Tensor x, Tensor w) { return kiln::conv2d(x, w); };
    auto c = dyn_case("conv2d in symbolic mode", body, symbolic_mode());
    for (int64_t s : {2, 3, 2}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 3, 6, 6}, DType::f32), make_array(rng, {4, 3, 3, 3}, DType::f32)},
            27, s_is(s));
    }
    c.expect_kept_exact(0, 2, 2);
  }
}
