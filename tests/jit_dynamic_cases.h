// Helpers of the symbolic-variant differential tests (jit_dynamic_ops_test.cpp,
// jit_dynamic_views_test.cpp): a small model of the shape policy that says how many variants a
// sequence of calls needs, and DynCase, which runs one body over extents and layouts against the
// reference interpreter and checks the compile count against the model.
#pragma once

#include "jit_test_util.h"

#include <kiln/kiln.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <set>

using namespace jt;
using kiln::DynamicMode;
using kiln::Function;
using kiln::Index;
using kiln::Options;
using kiln::Tensor;

namespace jt_dynamic {

constexpr int64_t kMultiple = kiln::ir::kSymbolMultiple;

inline Options symbolic_mode() {
  Options o;
  o.dynamic = DynamicMode::symbolic;
  o.max_variants = 64;  // the layouts multiply the variants; the bound is not what is tested here
  return o;
}

inline Options per_arg_mode(std::map<int, std::vector<int>> dims) {
  Options o;
  o.dynamic = DynamicMode::per_arg;
  o.dynamic_dims = std::move(dims);
  o.max_variants = 64;
  return o;
}

inline bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}
inline int64_t count_containing(const std::vector<std::string>& v, const std::string& needle) {
  int64_t n = 0;
  for (const auto& s : v) n += s.find(needle) != std::string::npos;
  return n;
}
inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

// The shape policy's variants for a sequence of calls (symbolic and per_arg modes, no pinning):
// a call no variant serves compiles one whose dims of extent >= 2 that the mode makes dynamic are
// symbols (equal extents share one), a symbol knowing "multiple of 16" when every extent seen by
// all of its dims at the calls that compiled was one; each variant also fixes dtype and
// contiguity per argument (not the data pointers' alignment).
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
    bool contiguous;
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
      if (ga.contiguous != args[i].is_contiguous()) return false;
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
      Arg a{args[i].dtype(), args[i].is_contiguous(), {}};
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

inline std::string layouts_str(const std::vector<Layout>& ls) {
  std::string s;
  for (Layout l : ls) s += std::string(s.empty() ? "" : ",") + layout_name(l);
  return s;
}

// The layout of argument i in a pattern (the last one repeats).
inline Layout lay(const std::vector<Layout>& p, size_t i) { return p[std::min(i, p.size() - 1)]; }

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
    // Every other call writes into caller-owned outputs (f.call), whose shapes kiln checks
    // against the variant's symbolic output shapes.
    opt.call_into_outputs = calls_ % 2 == 1;
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

  // The program cannot take some dims symbolic: the first symbolic trace failed once, each dim
  // of `kept` ({arg, dim}) was reported kept exact once, none of `symbolic` was (the symbols the
  // program does take stay), and `compiles` variants served the calls.
  using Dims = std::vector<std::pair<int, int>>;
  void expect_fallback(const Dims& kept, const Dims& symbolic, int64_t compiles) const {
    kiln::Stats st = f_.stats();
    INFO(name_ << "\nrecompile reasons:" << joined(st.recompile_reasons));
    CHECK(st.calls == calls_);
    CHECK(count_containing(st.recompile_reasons, "the symbolic trace failed") == 1);
    auto dim_kept = [](std::pair<int, int> ad) {
      return "arg " + std::to_string(ad.first) + " dim " + std::to_string(ad.second) +
             ": kept exact, the program cannot take it symbolic";
    };
    for (auto ad : kept) CHECK(count_containing(st.recompile_reasons, dim_kept(ad)) == 1);
    for (auto ad : symbolic) CHECK(count_containing(st.recompile_reasons, dim_kept(ad)) == 0);
    CHECK(count_containing(st.recompile_reasons, "kept exact") ==
          static_cast<int64_t>(kept.size()));
    CHECK(st.compiles == compiles);
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
// the rest (the general variant; vector tails on either side of 16, 32 and 64), a multiple again
// (served by the first variant, the more specialized), then 1 and 0 (exact variants) where the
// case allows them.
inline const std::vector<int64_t> kSizes = {16, 48, 2, 3, 17, 33, 15, 31, 65, 64};
inline const std::vector<int64_t> kSizes1 = {16, 48, 2, 3, 17, 33, 15, 31, 65, 64, 1};
inline const std::vector<int64_t> kSizes10 = {16, 48, 2, 3, 17, 33, 15, 31, 65, 64, 1, 0};

inline std::string s_is(int64_t s) { return "s=" + std::to_string(s); }

// Layout patterns (per argument; the last repeats).
using Pattern = std::vector<Layout>;
inline const std::vector<Pattern>& unary_patterns() {
  static const std::vector<Pattern> v = {{Layout::contiguous}, {Layout::strided},
                                         {Layout::transposed}, {Layout::offset},
                                         {Layout::negative},   {Layout::zero_stride}};
  return v;
}
// Three of the patterns for case k: contiguous and two others, rotating.
inline std::vector<Pattern> rotate3(const std::vector<Pattern>& all, size_t k) {
  std::vector<Pattern> v = {all[0]};
  v.push_back(all[1 + k % (all.size() - 1)]);
  v.push_back(all[1 + (k + 2) % (all.size() - 1)]);
  return v;
}

inline double dbl(int64_t v) { return static_cast<double>(std::max<int64_t>(v, 1)); }

// Calls `f` (made from `body`) once per extent with make_inputs(extent) and checks each result
// against the reference interpreter.
template <typename F, typename Make>
void check_extents(F body, const Function& f, const std::vector<int64_t>& extents, double tol_scale,
                   Make make_inputs) {
  for (int64_t e : extents) {
    CheckOptions opt;
    opt.function = &f;
    opt.tol_scale = tol_scale;
    opt.label = "extent " + std::to_string(e);
    CHECK(check_against_reference(body, make_inputs(e), opt));
  }
}

}  // namespace jt_dynamic

using namespace jt_dynamic;
