// Differential tests of every op of the C++ API: kiln::jit against the reference interpreter over
// seeded random shapes (0, 1, odd sizes, broadcasting), layouts (strided, transposed, offset,
// negative and zero strides) and every dtype each op takes. Each case compiles one kernel set, so
// the number of cases is budgeted (a few hundred compiles in all).
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <functional>
#include <limits>
#include <set>
#include <tuple>

using namespace jt;
using kiln::Index;
using kiln::Tensor;

namespace {

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A random shape with rank in [lo, hi] and at most `cap` elements.
std::vector<int64_t> capped_shape(Rng& rng, int lo, int hi, bool allow_zero, int64_t cap = 6000) {
  for (;;) {
    auto s = random_shape(rng, lo, hi, allow_zero, 130);
    if (numel_of(s) <= cap) return s;
  }
}

// A shape that broadcasts with `s`: a suffix of it with some dims set to 1 (numpy rules).
std::vector<int64_t> broadcast_partner(Rng& rng, const std::vector<int64_t>& s) {
  size_t keep = static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(s.size())));
  std::vector<int64_t> t(s.end() - static_cast<std::ptrdiff_t>(keep), s.end());
  for (auto& d : t)
    if (uniform_int(rng, 0, 2) == 0) d = 1;
  return t;
}

std::string label(const std::string& what, DType t, uint64_t seed) {
  return what + " dtype " + dt(t) + " seed " + std::to_string(seed);
}

Layout layout_n(size_t i) { return all_layouts()[i % all_layouts().size()]; }

double red_count(const std::vector<int64_t>& shape, const std::vector<int>& axes) {
  double k = 1;
  if (axes.empty())
    for (int64_t d : shape) k *= static_cast<double>(d);
  for (int a : axes)
    k *= static_cast<double>(
        shape[static_cast<size_t>(a < 0 ? a + static_cast<int>(shape.size()) : a)]);
  return std::max(k, 1.0);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Unary ops

struct UnaryCase {
  const char* name;
  std::function<Tensor(Tensor)> fn;
  Values values;
  bool takes_bool;
};

static const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> v = {
      {"exp", [](Tensor x) { return kiln::exp(x); }, Values::normal, true},
      {"log", [](Tensor x) { return kiln::log(x); }, Values::positive, false},
      {"sqrt", [](Tensor x) { return kiln::sqrt(x); }, Values::positive, false},
      {"rsqrt", [](Tensor x) { return kiln::rsqrt(x); }, Values::positive, false},
      {"tanh", [](Tensor x) { return kiln::tanh(x); }, Values::wide, true},
      {"sigmoid", [](Tensor x) { return kiln::sigmoid(x); }, Values::wide, true},
      {"relu", [](Tensor x) { return kiln::relu(x); }, Values::normal, false},
      {"gelu", [](Tensor x) { return kiln::gelu(x); }, Values::wide, true},
      {"gelu_tanh", [](Tensor x) { return kiln::gelu(x, true); }, Values::wide, true},
      {"silu", [](Tensor x) { return kiln::silu(x); }, Values::wide, true},
      {"erf", [](Tensor x) { return kiln::erf(x); }, Values::normal, true},
      {"abs", [](Tensor x) { return kiln::abs(x); }, Values::normal, true},
      {"abs_method", [](Tensor x) { return x.abs(); }, Values::normal, false},
      {"square", [](Tensor x) { return kiln::square(x); }, Values::normal, true},
      {"neg", [](Tensor x) { return kiln::neg(x); }, Values::normal, false},
      {"unary_minus", [](Tensor x) { return -x; }, Values::normal, false},
  };
  return v;
}

TEST_CASE("jit ops: unary ops over every dtype, random shapes and layouts",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1000;
  size_t k = 0;
  for (const UnaryCase& c : unary_cases()) {
    for (DType t : all_dtypes()) {
      if (t == DType::boolean && !c.takes_bool) continue;
      Rng rng(++seed);
      auto shape = capped_shape(rng, 0, 4, true);
      Layout lay = layout_n(k++);
      auto fn = c.fn;
      check_against_reference([fn](Tensor x) { return fn(x); },
                              {make_array(rng, shape, t, lay, c.values)},
                              {.label = label(c.name, t, seed)});
    }
  }
}

TEST_CASE("jit ops: exp and gelu over sizes 0, 1, odd and large, every layout",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 2000;
  for (int64_t n : {0, 1, 3, 7, 17, 33, 130, 1031, 70001}) {
    for (Layout lay : {Layout::contiguous, Layout::strided, Layout::negative}) {
      Rng rng(++seed);
      check_against_reference(
          [](Tensor x) { return kiln::exp(x); }, {make_array(rng, {n}, DType::f32, lay)},
          {.label = "exp n=" + std::to_string(n) + " seed " + std::to_string(seed)});
    }
  }
  for (auto shape : std::vector<std::vector<int64_t>>{
           {130, 33}, {3, 0, 5}, {1, 1, 1}, {17, 1, 7}, {2, 3, 5, 7}}) {
    for (Layout lay : all_layouts()) {
      Rng rng(++seed);
      check_against_reference([](Tensor x) { return kiln::gelu(x); },
                              {make_array(rng, shape, DType::f32, lay, Values::wide)},
                              {.label = "gelu seed " + std::to_string(seed)});
    }
  }
}

TEST_CASE("jit ops: unary ops on special values (nan, inf, -0, large)",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  std::vector<double> vals = {nan,    inf,  -inf,  0.0,   -0.0,   1e-30,
                              -1e-30, 80.0, -80.0, 100.0, -100.0, 1e30};
  int64_t n = static_cast<int64_t>(vals.size());
  for (const UnaryCase& c : unary_cases()) {
    for (DType t : {DType::f32, DType::f64}) {
      auto fn = c.fn;
      std::string name = c.name;
      // log/sqrt/rsqrt of negatives are NaN in both; all of these are defined by IEEE/libm.
      check_against_reference([fn](Tensor x) { return fn(x); }, {make_array_from({n}, t, vals)},
                              {.label = "special values " + name + " " + dt(t)});
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Binary ops

struct BinaryCase {
  const char* name;
  std::function<Tensor(Tensor, Tensor)> fn;
  Values lhs, rhs;
  bool takes_bool;
};

static const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> v = {
      {"add", [](Tensor a, Tensor b) { return a + b; }, Values::normal, Values::normal, true},
      {"sub", [](Tensor a, Tensor b) { return a - b; }, Values::normal, Values::normal, false},
      {"mul", [](Tensor a, Tensor b) { return a * b; }, Values::normal, Values::normal, true},
      {"div", [](Tensor a, Tensor b) { return a / b; }, Values::normal, Values::positive, false},
      {"pow", [](Tensor a, Tensor b) { return kiln::pow(a, b); }, Values::positive, Values::normal,
       true},
      {"maximum", [](Tensor a, Tensor b) { return kiln::maximum(a, b); }, Values::normal,
       Values::normal, true},
      {"minimum", [](Tensor a, Tensor b) { return kiln::minimum(a, b); }, Values::normal,
       Values::normal, true},
      {"lt", [](Tensor a, Tensor b) { return a < b; }, Values::normal, Values::normal, true},
      {"le", [](Tensor a, Tensor b) { return a <= b; }, Values::normal, Values::normal, true},
      {"gt", [](Tensor a, Tensor b) { return a > b; }, Values::normal, Values::normal, true},
      {"ge", [](Tensor a, Tensor b) { return a >= b; }, Values::normal, Values::normal, true},
      {"eq", [](Tensor a, Tensor b) { return a == b; }, Values::normal, Values::normal, true},
      {"ne", [](Tensor a, Tensor b) { return a != b; }, Values::normal, Values::normal, true},
  };
  return v;
}

TEST_CASE("jit ops: binary ops over every dtype with broadcasting", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 3000;
  size_t k = 0;
  for (const BinaryCase& c : binary_cases()) {
    for (DType t : all_dtypes()) {
      if (t == DType::boolean && !c.takes_bool) continue;
      Rng rng(++seed);
      auto sa = capped_shape(rng, 0, 4, true);
      auto sb = broadcast_partner(rng, sa);
      if (uniform_int(rng, 0, 1)) std::swap(sa, sb);
      Values lv = c.lhs, rv = c.rhs;
      // Integer powers: small non-negative exponents (numpy rejects negative integer powers).
      if (std::string(c.name) == "pow" && !kiln::is_floating(t)) rv = Values::positive;
      TestArray a = make_array(rng, sa, t, layout_n(k++), lv);
      TestArray b = make_array(rng, sb, t, layout_n(k++), rv);
      auto fn = c.fn;
      check_against_reference([fn](Tensor x, Tensor y) { return fn(x, y); }, {a, b},
                              {.label = label(c.name, t, seed)});
    }
  }
}

TEST_CASE("jit ops: comparisons with many equal elements", "[jit][ops]" KILN_NEEDS_LLVM) {
  // Values drawn from a few integers so that == / <= / >= see ties in every dtype.
  uint64_t seed = 3500;
  for (DType t : all_dtypes()) {
    Rng rng(++seed);
    std::vector<double> va, vb;
    for (int i = 0; i < 5 * 7; ++i) {
      va.push_back(static_cast<double>(uniform_int(rng, t == DType::boolean ? 0 : -1, 1)));
      vb.push_back(static_cast<double>(uniform_int(rng, t == DType::boolean ? 0 : -1, 1)));
    }
    auto a = make_array_from({5, 7}, t, va), b = make_array_from({5, 7}, t, vb);
    check_against_reference(
        [](Tensor x, Tensor y) {
          return std::vector<Tensor>{x == y, x != y, x <= y, x >= y, x<y, x> y};
        },
        {a, b}, {.label = "comparisons with ties " + dt(t)});
  }
}

TEST_CASE("jit ops: binary ops with C++ scalars keep the tensor dtype",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 3600;
  for (DType t : numeric_dtypes()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {7, 17}, t, Layout::strided, Values::positive);
    check_against_reference(
        [](Tensor x) {
          return std::vector<Tensor>{
              x + 1.0,           2.0 * x,           x - 3.0, 3.0 - x,  x * 0.5,
              x / 4.0,           1.0 / x,           x > 2.0, x <= 1.0, kiln::pow(x, 3.0),
              kiln::pow(x, 0.5), kiln::pow(x, 2.0), x + 1.5};
        },
        {a}, {.label = "scalars " + dt(t)});
  }
}

TEST_CASE("jit ops: mixed-dtype promotion", "[jit][ops]" KILN_NEEDS_LLVM) {
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::f32, DType::i32},     {DType::f16, DType::bf16}, {DType::i8, DType::f16},
      {DType::boolean, DType::i32}, {DType::f32, DType::f64},  {DType::i8, DType::i64},
      {DType::bf16, DType::f32},    {DType::i64, DType::f32}};
  uint64_t seed = 3700;
  for (auto [ta, tb] : pairs) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {3, 1, 5}, ta, Layout::contiguous);
    TestArray b = make_array(rng, {4, 1}, tb, Layout::offset, Values::positive);
    check_against_reference(
        [](Tensor x, Tensor y) {
          return std::vector<Tensor>{x + y, x * y, x / y, kiln::maximum(x, y), x < y};
        },
        {a, b}, {.label = "promotion " + dt(ta) + " with " + dt(tb)});
  }
}

TEST_CASE("jit ops: integer arithmetic wraps like C++/numpy", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 3800;
  for (DType t : {DType::i8, DType::i32, DType::i64}) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {33}, t, Layout::contiguous, Values::wide);
    TestArray b = make_array(rng, {33}, t, Layout::contiguous, Values::wide);
    check_against_reference(
        [](Tensor x, Tensor y) {
          return std::vector<Tensor>{x + y, x * y, x - y, x * y * y, -x};
        },
        {a, b}, {.label = "wrap " + dt(t)});
  }
}

// ------------------------------------------------------------------------------------------------
// where, clip

TEST_CASE("jit ops: where with broadcasting over dtypes", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 4000;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    Rng rng(++seed);
    auto s = capped_shape(rng, 1, 3, true);
    TestArray c = make_array(rng, broadcast_partner(rng, s), DType::boolean, layout_n(k++));
    TestArray a = make_array(rng, s, t, layout_n(k++));
    TestArray b = make_array(rng, broadcast_partner(rng, s), t, layout_n(k++));
    check_against_reference([](Tensor cc, Tensor x, Tensor y) { return kiln::where(cc, x, y); },
                            {c, a, b}, {.label = label("where", t, seed)});
  }
  // A non-bool condition (cast to bool) and a condition computed in the kernel.
  Rng rng(++seed);
  TestArray ci = make_array(rng, {5, 7}, DType::i32, Layout::transposed);
  TestArray a = make_array(rng, {5, 7}, DType::f32);
  TestArray b = make_array(rng, {7}, DType::f32);
  check_against_reference(
      [](Tensor cc, Tensor x, Tensor y) {
        return std::vector<Tensor>{kiln::where(cc, x, y), kiln::where(x > y, x, y * 2.0)};
      },
      {ci, a, b}, {.label = "where int condition"});
}

TEST_CASE("jit ops: clip", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 4100;
  for (DType t : numeric_dtypes()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {17, 3}, t, Layout::negative, Values::wide);
    check_against_reference(
        [](Tensor x) {
          return std::vector<Tensor>{kiln::clip(x, -1.0, 2.0), kiln::clip(x, std::nullopt, 0.0),
                                     kiln::clip(x, 3.0, std::nullopt)};
        },
        {a}, {.label = label("clip", t, seed)});
  }
}

// ------------------------------------------------------------------------------------------------
// Reductions

TEST_CASE("jit ops: sum mean max min over axes None/int/tuple/negative, keepdims",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  struct R {
    const char* name;
    int op;  // 0 sum 1 mean 2 max 3 min
  };
  const std::vector<R> reds = {{"sum", 0}, {"mean", 1}, {"max", 2}, {"min", 3}};
  uint64_t seed = 5000;
  size_t k = 0;
  for (const R& r : reds) {
    for (DType t : all_dtypes()) {
      for (int rep = 0; rep < 2; ++rep) {
        Rng rng(++seed);
        bool zero_ok = r.op < 2;  // max/min of an empty axis has no identity
        auto shape = capped_shape(rng, 1, 4, zero_ok);
        const int nd = static_cast<int>(shape.size());
        // Axes: all, one (maybe negative), or a tuple of two with one negative.
        std::vector<int> axes;
        int mode = static_cast<int>(uniform_int(rng, 0, 2));
        if (mode == 1) {
          int a = static_cast<int>(uniform_int(rng, 0, nd - 1));
          axes = {uniform_int(rng, 0, 1) ? a - nd : a};
        } else if (mode == 2 && nd >= 2) {
          int a = static_cast<int>(uniform_int(rng, 0, nd - 2));
          int b = static_cast<int>(uniform_int(rng, a + 1, nd - 1));
          axes = {b - nd, a};
        }
        bool keep = uniform_int(rng, 0, 1);
        int op = r.op;
        auto fn = [axes, keep, op](Tensor x) {
          kiln::Axes ax = axes.empty() ? kiln::Axes() : kiln::Axes(axes);
          switch (op) {
            case 0:
              return x.sum(ax, keep);
            case 1:
              return x.mean(ax, keep);
            case 2:
              return x.max(ax, keep);
            default:
              return kiln::min(x, ax, keep);
          }
        };
        double kk = red_count(shape, axes);
        std::string axes_s = axes.empty() ? "None" : "";
        for (int a : axes) axes_s += std::to_string(a) + ",";
        check_against_reference(fn, {make_array(rng, shape, t, layout_n(k++))},
                                {.tol_scale = r.op == 0 ? kk : std::sqrt(kk),
                                 .label = label(std::string(r.name) + " axes " + axes_s +
                                                    " keepdims " + std::to_string(keep),
                                                t, seed)});
      }
    }
  }
}

TEST_CASE("jit ops: reductions of large rows and of every axis of a 3-d tensor",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 5500;
  {
    Rng rng(++seed);
    TestArray a = make_array(rng, {3, 70001}, DType::f32);
    check_against_reference(
        [](Tensor x) {
          return std::vector<Tensor>{x.sum(1), x.max(-1), x.mean(1, true)};
        },
        {a}, {.tol_scale = 70001, .label = "long rows"});
  }
  {
    Rng rng(++seed);
    TestArray a = make_array(rng, {70001, 3}, DType::f32, Layout::transposed);
    check_against_reference(
        [](Tensor x) {
          return std::vector<Tensor>{x.sum(0), x.min(0, true)};
        },
        {a}, {.tol_scale = 70001, .label = "long columns"});
  }
  for (Layout lay : all_layouts()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {5, 17, 9}, DType::f32, lay);
    check_against_reference(
        [](Tensor x) {
          return std::vector<Tensor>{x.sum(0),
                                     x.sum(1),
                                     x.sum(2),
                                     x.sum({0, 2}),
                                     x.max({0, 1}),
                                     x.mean(),
                                     x.min({-1, -3}, true)};
        },
        {a}, {.tol_scale = 765, .label = std::string("every axis ") + layout_name(lay)});
  }
}

// ------------------------------------------------------------------------------------------------
// softmax, log_softmax, layer_norm, rms_norm

TEST_CASE("jit ops: softmax and log_softmax over axes and dtypes", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 6000;
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32}) {
    for (int axis : {-1, 0, 1}) {
      Rng rng(++seed);
      auto shape = capped_shape(rng, 2, 3, false);
      double kk = static_cast<double>(
          shape[static_cast<size_t>(axis < 0 ? axis + static_cast<int>(shape.size()) : axis)]);
      TestArray a = make_array(rng, shape, t, layout_n(k++), Values::wide);
      const double scale = std::max(2.0, std::sqrt(kk));
      // Each alone is one kernel whose float16/bfloat16 intermediates stay in float32, like the
      // oracle: CONVENTIONS tolerances.
      check_against_reference(
          [axis](Tensor x) { return kiln::softmax(x, axis); }, {a},
          {.tol_scale = scale, .label = label("softmax axis " + std::to_string(axis), t, seed)});
      check_against_reference(
          [axis](Tensor x) { return kiln::log_softmax(x, axis); }, {a},
          {.tol_scale = scale,
           .label = label("log_softmax axis " + std::to_string(axis), t, seed)});
      // Both from one function: CSE shares exp(x - max) between them, so it is stored once as a
      // temp in the input dtype, i.e. rounded to float16/bfloat16 where the oracle keeps it exact.
      // log_softmax's outputs near 0 then carry an absolute error of one rounding of an O(1) value:
      // for those dtypes the absolute tolerance is the relative one.
      std::optional<Tol> both;
      if (t == DType::f16 || t == DType::bf16)
        both = Tol{tol_for(t, scale).rtol, tol_for(t, scale).rtol};
      check_against_reference(
          [axis](Tensor x) {
            return std::vector<Tensor>{kiln::softmax(x, axis), kiln::log_softmax(x, axis)};
          },
          {a},
          {.tol_scale = scale,
           .label = label("softmax and log_softmax axis " + std::to_string(axis), t, seed),
           .tol = both});
    }
  }
  // Large rows (past any vector width or tile).
  Rng rng(++seed);
  check_against_reference(
      [](Tensor x) { return kiln::softmax(x); },
      {make_array(rng, {4, 4099}, DType::f32, Layout::contiguous, Values::wide)},
      {.tol_scale = 64, .label = "softmax long rows"});
}

TEST_CASE("jit ops: layer_norm with and without weight/bias, other axes",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 6100;
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (int axis : {-1, 0, 1}) {
      for (int params = 0; params < 4; ++params) {
        if (params % 2 == 1 && axis != -1 && t != DType::f32) continue;  // budget
        Rng rng(++seed);
        auto shape = capped_shape(rng, 2, 3, false);
        size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int>(shape.size()) : axis);
        TestArray x = make_array(rng, shape, t, layout_n(k++), Values::wide);
        TestArray w = make_array(rng, {shape[ax]}, t, Layout::strided);
        TestArray b = make_array(rng, {shape[ax]}, t, Layout::contiguous);
        bool use_w = params & 1, use_b = params & 2;
        double kk = static_cast<double>(shape[ax]);
        check_against_reference(
            [axis, use_w, use_b](Tensor xx, Tensor ww, Tensor bb) {
              return kiln::layer_norm(xx, use_w ? ww : Tensor(), use_b ? bb : Tensor(), axis, 1e-5);
            },
            {x, w, b},
            {.tol_scale = std::max(4.0, std::sqrt(kk)),
             .label = label("layer_norm axis " + std::to_string(axis) + " weight " +
                                std::to_string(use_w) + " bias " + std::to_string(use_b),
                            t, seed)});
      }
    }
  }
}

TEST_CASE("jit ops: rms_norm with and without weight", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 6200;
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (int axis : {-1, 0}) {
      for (bool use_w : {false, true}) {
        Rng rng(++seed);
        auto shape = capped_shape(rng, 2, 3, false);
        size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int>(shape.size()) : axis);
        TestArray x = make_array(rng, shape, t, layout_n(k++), Values::wide);
        TestArray w = make_array(rng, {shape[ax]}, t, Layout::negative);
        double kk = static_cast<double>(shape[ax]);
        check_against_reference(
            [axis, use_w](Tensor xx, Tensor ww) {
              return kiln::rms_norm(xx, use_w ? ww : Tensor(), axis);
            },
            {x, w},
            {.tol_scale = std::max(4.0, std::sqrt(kk)),
             .label =
                 label("rms_norm axis " + std::to_string(axis) + " weight " + std::to_string(use_w),
                       t, seed)});
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// matmul

TEST_CASE("jit ops: matmul 1-d, 2-d, batched with broadcast batch dims",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  struct M {
    std::vector<int64_t> a, b;
  };
  const std::vector<M> shapes = {{{7}, {7}},
                                 {{1}, {1}},
                                 {{5, 7}, {7}},
                                 {{7}, {7, 3}},
                                 {{1, 1}, {1, 1}},
                                 {{3, 0}, {0, 4}},
                                 {{0, 5}, {5, 3}},
                                 {{17, 33}, {33, 130}},
                                 {{33, 17}, {17, 1}},
                                 {{1, 130}, {130, 33}},
                                 {{2, 5, 7}, {7, 3}},
                                 {{5, 7}, {3, 7, 4}},
                                 {{2, 1, 5, 7}, {3, 7, 4}},
                                 {{4, 3, 9}, {4, 9, 5}},
                                 {{2, 3, 4}, {4}},
                                 {{64, 64}, {64, 64}},
                                 {{3}, {2, 3, 5}}};
  uint64_t seed = 7000;
  size_t k = 0;
  for (const M& m : shapes) {
    for (DType t :
         {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i32, DType::i64}) {
      // All dtypes on a few shapes, float32 and one other dtype on the rest (budget).
      bool all = k < 5 * 7 || t == DType::f32 || t == (k % 2 ? DType::i32 : DType::bf16);
      ++k;
      if (!all) continue;
      Rng rng(++seed);
      TestArray a = make_array(rng, m.a, t, layout_n(k));
      TestArray b = make_array(rng, m.b, t, layout_n(k + 3));
      double kk = static_cast<double>(m.a.back());
      check_against_reference(
          [](Tensor x, Tensor y) { return kiln::matmul(x, y); }, {a, b},
          {.tol_scale = std::max(1.0, kk),
           .label = label("matmul " + dims_str(m.a) + " @ " + dims_str(m.b), t, seed)});
    }
  }
}

TEST_CASE("jit ops: matmul of transposed operands (.T) and strided views",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 7500;
  for (auto [mm, kk, nn] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 7, 3}, {17, 33, 9}, {1, 130, 1}, {64, 16, 33}}) {
    for (Layout lay : {Layout::contiguous, Layout::transposed, Layout::strided, Layout::negative}) {
      Rng rng(++seed);
      TestArray at = make_array(rng, {kk, mm}, DType::f32, lay);  // used as a.T
      TestArray bt = make_array(rng, {nn, kk}, DType::f32, lay);  // used as b.T
      TestArray b = make_array(rng, {kk, nn}, DType::f32, Layout::offset);
      check_against_reference(
          [](Tensor x, Tensor y, Tensor z) {
            return std::vector<Tensor>{kiln::matmul(x.T(), z), kiln::matmul(x.T(), y.T()),
                                       kiln::operator_matmul(y, x)};
          },
          {at, bt, b},
          {.tol_scale = static_cast<double>(std::max(kk, mm)),
           .label =
               "matmul .T " + std::string(layout_name(lay)) + " seed " + std::to_string(seed)});
    }
  }
}

TEST_CASE("jit ops: matmul with fused producers and consumers", "[jit][ops]" KILN_NEEDS_LLVM) {
  Rng rng(7600);
  TestArray x = make_array(rng, {9, 33}, DType::f32);
  TestArray w = make_array(rng, {33, 17}, DType::f32, Layout::transposed);
  TestArray b = make_array(rng, {17}, DType::f32);
  check_against_reference(
      [](Tensor xx, Tensor ww, Tensor bb) {
        Tensor h = kiln::matmul(kiln::tanh(xx) * 2.0, ww) + bb;
        return std::vector<Tensor>{kiln::relu(h), kiln::gelu(h).sum(1)};
      },
      {x, w, b}, {.tol_scale = 33 * 17, .label = "mlp layer"});
}

// ------------------------------------------------------------------------------------------------
// conv2d

TEST_CASE("jit ops: conv2d stride, padding, dilation, groups, bias", "[jit][ops]" KILN_NEEDS_LLVM) {
  struct C {
    int64_t n, c, h, w, o, kh, kw;
    kiln::Conv2dParams p;
    bool bias;
  };
  auto P = [](int64_t s0, int64_t s1, int64_t p0, int64_t p1, int64_t d0, int64_t d1, int64_t g) {
    kiln::Conv2dParams p;
    p.stride[0] = s0;
    p.stride[1] = s1;
    p.padding[0] = p0;
    p.padding[1] = p1;
    p.dilation[0] = d0;
    p.dilation[1] = d1;
    p.groups = g;
    return p;
  };
  const std::vector<C> cases = {
      {1, 1, 5, 5, 1, 3, 3, P(1, 1, 0, 0, 1, 1, 1), false},
      {2, 3, 8, 9, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true},
      {1, 3, 9, 8, 5, 3, 2, P(2, 1, 0, 1, 1, 1, 1), true},
      {1, 4, 9, 9, 6, 3, 3, P(1, 2, 2, 0, 2, 1, 2), false},
      {2, 4, 7, 7, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 4), true},   // depthwise
      {1, 2, 1, 1, 3, 1, 1, P(1, 1, 0, 0, 1, 1, 1), true},   // 1x1 on a 1x1 image
      {1, 3, 5, 5, 2, 5, 5, P(1, 1, 0, 0, 1, 1, 1), false},  // kernel = image
      {1, 3, 17, 13, 8, 3, 3, P(2, 2, 1, 1, 2, 2, 1), true},
      {0, 3, 5, 5, 2, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true},  // empty batch
      {1, 6, 6, 6, 9, 1, 3, P(3, 1, 0, 2, 1, 3, 3), true},
  };
  uint64_t seed = 8000;
  size_t k = 0;
  for (const C& c : cases) {
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32}) {
      if (t != DType::f32 && k++ % 3 != 0) continue;  // budget: float32 always, others in turn
      Rng rng(++seed);
      TestArray x = make_array(rng, {c.n, c.c, c.h, c.w}, t, layout_n(seed));
      TestArray w = make_array(rng, {c.o, c.c / c.p.groups, c.kh, c.kw}, t, layout_n(seed + 2));
      TestArray b = make_array(rng, {c.o}, t);
      double kk = static_cast<double>(c.c / c.p.groups * c.kh * c.kw);
      kiln::Conv2dParams p = c.p;
      std::string what =
          "conv2d x " + dims_str(x.array.shape()) + " w " + dims_str(w.array.shape()) + " stride " +
          std::to_string(p.stride[0]) + "," + std::to_string(p.stride[1]) + " pad " +
          std::to_string(p.padding[0]) + "," + std::to_string(p.padding[1]) + " dil " +
          std::to_string(p.dilation[0]) + "," + std::to_string(p.dilation[1]) + " groups " +
          std::to_string(p.groups) + " bias " + std::to_string(c.bias);
      if (c.bias)
        check_against_reference(
            [p](Tensor xx, Tensor ww, Tensor bb) { return kiln::conv2d(xx, ww, bb, p); }, {x, w, b},
            {.tol_scale = kk, .label = label(what, t, seed)});
      else
        check_against_reference(
            [p](Tensor xx, Tensor ww) { return kiln::conv2d(xx, ww, Tensor(), p); }, {x, w},
            {.tol_scale = kk, .label = label(what, t, seed)});
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Views and data movement

TEST_CASE("jit ops: reshape, transpose, broadcast_to on every dtype",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9000;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {6, 4, 5}, t, layout_n(k++));
    TestArray v = make_array(rng, {5, 1}, t, layout_n(k++));
    check_against_reference(
        [](Tensor x, Tensor y) {
          return std::vector<Tensor>{
              x.reshape({2, 3, 20}),
              x.reshape({-1}),
              kiln::reshape(x, {4, -1}),
              x.transpose({2, 0, 1}),
              x.T(),
              kiln::transpose(x, {0, 2, 1}),
              kiln::broadcast_to(y, {3, 5, 7}),
              x.T().reshape({5, 24}),
              x.transpose({1, 0, 2}).reshape({4, 30}) +
                  kiln::broadcast_to(y, {1, 5, 1}).reshape({1, 5}).sum().reshape({1, 1})};
        },
        {a, v}, {.tol_scale = 5, .label = label("views", t, seed)});
  }
  // Scalars and size-0/1 shapes.
  Rng rng(++seed);
  check_against_reference(
      [](Tensor s, Tensor z, Tensor o) {
        return std::vector<Tensor>{
            kiln::broadcast_to(s, {3, 4}),    s.reshape({1, 1}), z.reshape({0, 3}), z.T(),
            kiln::broadcast_to(o, {2, 0, 4}), o.reshape({})};
      },
      {make_array(rng, {}, DType::f32), make_array(rng, {3, 0}, DType::f32),
       make_array(rng, {1, 1}, DType::f32)},
      {.label = "scalar and empty views"});
}

TEST_CASE("jit ops: concatenate along each axis, mixed dtypes, empty pieces",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9100;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {3, 4, 5}, t, layout_n(k++));
    TestArray b = make_array(rng, {3, 1, 5}, t, layout_n(k++));
    TestArray c = make_array(rng, {3, 4, 2}, t, layout_n(k++));
    TestArray e = make_array(rng, {3, 0, 5}, t);
    check_against_reference(
        [](Tensor x, Tensor y, Tensor z, Tensor w) {
          return std::vector<Tensor>{kiln::concatenate({x, y, x}, 1), kiln::concatenate({x, z}, -1),
                                     kiln::concatenate({x, x}, 0), kiln::concatenate({y, w, y}, 1),
                                     kiln::concatenate({x.index({Index::slice(1)}), x}, 0)};
        },
        {a, b, c, e}, {.label = label("concatenate", t, seed)});
  }
  Rng rng(++seed);
  check_against_reference(
      [](Tensor x, Tensor y, Tensor z) {
        return kiln::concatenate({x, y, z}, 0);
      },
      {make_array(rng, {2, 3}, DType::i8), make_array(rng, {1, 3}, DType::f16),
       make_array(rng, {4, 3}, DType::i32, Layout::transposed)},
      {.label = "concatenate i8 f16 i32"});
}

TEST_CASE("jit ops: astype between every pair of dtypes", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9200;
  size_t k = 0;
  for (DType from : all_dtypes()) {
    for (DType to : all_dtypes()) {
      Rng rng(++seed);
      TestArray a = make_array(rng, {7, 5}, from, layout_n(k++), Values::wide);
      check_against_reference([to](Tensor x) { return x.astype(to); }, {a},
                              {.label = "astype " + dt(from) + " -> " + dt(to)});
    }
  }
}

TEST_CASE("jit ops: astype edge values (wrap, truncation toward zero, rounding)",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  auto ints = make_array_from({8}, DType::i32, {200, -200, 1000, 127, 128, -129, 65535, -1});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.astype(DType::i8), x.astype(DType::boolean)};
      },
      {ints}, {.label = "i32 -> i8 wrap"});
  auto floats = make_array_from({10}, DType::f32,
                                {2.7, -2.7, 0.5, -0.5, 1e-8, -0.0, 126.9, -127.9, 65520, 3.14159});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.astype(DType::i8),   x.astype(DType::i32),
                                   x.astype(DType::i64),  x.astype(DType::f16),
                                   x.astype(DType::bf16), x.astype(DType::boolean)};
      },
      {floats}, {.label = "f32 -> ints, halves, bool"});
  auto i64s = make_array_from(
      {4}, DType::i64, {int64_t{1} << 40, -(int64_t{1} << 40) - 3, (int64_t{1} << 31) + 5, 7});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.astype(DType::i32), x.astype(DType::i8), x.astype(DType::f64),
                                   x.astype(DType::f32)};
      },
      {i64s}, {.label = "i64 -> narrower"});
}

TEST_CASE("jit ops: index with slices, steps, negative steps, integers, new axes, ellipsis",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  using I = Index;
  const std::vector<std::pair<std::string, std::vector<I>>> cases = {
      {"[1:5]", {I::slice(1, 5)}},
      {"[:, ::2]", {I::slice(), I::slice({}, {}, 2)}},
      {"[::-1]", {I::slice({}, {}, -1)}},
      {"[..., None]", {I::ellipsis(), I::new_axis()}},
      {"[0]", {I::at(0)}},
      {"[-1, 2:]", {I::at(-1), I::slice(2)}},
      {"[None, ..., 1]", {I::new_axis(), I::ellipsis(), I::at(1)}},
      {"[5:1:-2]", {I::slice(5, 1, -2)}},
      {"[:0]", {I::slice({}, 0)}},
      {"[:, :, ::-3]", {I::slice(), I::slice(), I::slice({}, {}, -3)}},
      {"[-2::-1, 1::3, -1]", {I::slice(-2, {}, -1), I::slice(1, {}, 3), I::at(-1)}},
      {"[2, 3, 4]", {I::at(2), I::at(3), I::at(4)}},
      {"[..., ::2, None]", {I::ellipsis(), I::slice({}, {}, 2), I::new_axis()}},
      {"[100:]", {I::slice(100)}},
      {"[-100:3]", {I::slice(-100, 3)}},
      {"[:, -100::-1]", {I::slice(), I::slice(-100, {}, -1)}},
  };
  uint64_t seed = 9300;
  size_t k = 0;
  for (const auto& [name, idx] : cases) {
    for (DType t : {DType::f32, k % 2 ? DType::i8 : DType::bf16}) {
      Rng rng(++seed);
      TestArray a = make_array(rng, {7, 9, 5}, t, layout_n(k++));
      auto ix = idx;
      check_against_reference([ix](Tensor x) { return x.index(ix) * 2.0; }, {a},
                              {.label = label("index " + name, t, seed)});
    }
  }
  // x.sum(1)[:, None] + y, and an index of an index.
  Rng rng(++seed);
  check_against_reference(
      [](Tensor x, Tensor y) {
        Tensor s = x.sum(1).index({I::slice(), I::new_axis()});
        return std::vector<Tensor>{
            s + y, x.index({I::slice({}, {}, -1)}).index({I::slice(1, {}, 2), I::at(-2)})};
      },
      {make_array(rng, {6, 9}, DType::f32, Layout::negative), make_array(rng, {6, 9}, DType::f32)},
      {.tol_scale = 9, .label = "x.sum(1)[:, None] + y"});
}

// ------------------------------------------------------------------------------------------------
// Outputs that are inputs, views of inputs, constants or repeated

TEST_CASE("jit ops: outputs that alias inputs, repeat or are constants",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  Rng rng(9400);
  TestArray a = make_array(rng, {5, 7}, DType::f32, Layout::negative);
  check_against_reference([](Tensor x) { return x; }, {a},
                          {.label = "identity of a strided input"});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.T(), x, x.T()};
      },
      {a}, {.label = "views of the input, repeated"});
  check_against_reference(
      [](Tensor x) {
        Tensor y = kiln::exp(x);
        return std::vector<Tensor>{y, y, y + 1.0};
      },
      {a}, {.label = "the same value twice"});
  const float cdata[6] = {1, 2, 3, 4, 5, 6};
  check_against_reference(
      [cdata](Tensor x) {
        Tensor c = kiln::constant(cdata, {2, 3}, DType::f32);
        return std::vector<Tensor>{c, kiln::scalar(2.5, DType::f16),
                                   x.index({Index::slice(0, 2), Index::slice(0, 3)}) * c};
      },
      {a}, {.label = "constant outputs"});
  check_against_reference([](Tensor x) { return kiln::exp(x); }, {a},
                          {.label = "f.call into caller outputs", .call_into_outputs = true});
}

TEST_CASE("jit ops: one function reused across layouts reads runtime strides",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  // Same shape, different strides: the signature only records "strided", so one compiled kernel
  // must read each call's strides.
  auto fn = [](Tensor x, Tensor y) { return kiln::tanh(x) * y + x.sum(1, true); };
  kiln::Function f = kiln::jit(fn);
  uint64_t seed = 9500;
  // The signature classes seen: contiguous or not, per argument (alignment is not one).
  std::set<std::vector<bool>> classes;
  for (Layout lay : all_layouts()) {
    Rng rng(++seed);
    TestArray x = make_array(rng, {9, 17}, DType::f32, lay);
    TestArray y = make_array(rng, {9, 17}, DType::f32, layout_n(seed));
    std::vector<bool> cls;
    for (const TestArray* t : {&x, &y}) cls.push_back(t->array.is_contiguous());
    classes.insert(cls);
    check_against_reference(
        fn, {x, y},
        {.tol_scale = 17, .label = std::string("reuse ") + layout_name(lay), .function = &f});
  }
  CHECK(f.stats().compiles == static_cast<int64_t>(classes.size()));
  CHECK(f.stats().calls == static_cast<int64_t>(all_layouts().size()));
}

TEST_CASE("jit ops: NaN propagates through maximum, minimum, relu, clip and max/min reductions",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    auto a = make_array_from({2, 5}, t, {1, nan, -1, 0, 2, -3, 4, nan, 0.5, -0.5});
    auto b = make_array_from({2, 5}, t, {nan, 0, 0, nan, 1, 1, 1, 1, 1, 1});
    check_against_reference(
        [](Tensor x, Tensor y) {
          return std::vector<Tensor>{kiln::maximum(x, y),
                                     kiln::minimum(x, y),
                                     kiln::relu(x),
                                     kiln::clip(x, -1.0, 1.0),
                                     x.max(1),
                                     x.min(0),
                                     y.max(),
                                     x.sum(1),
                                     x == x,
                                     x != x};
        },
        {a, b}, {.label = "NaN " + dt(t)});
  }
}

// ------------------------------------------------------------------------------------------------
// Minimal repros of the bugs in tests/BUGS_FOUND.md (the broad tests above fail on them too;
// these name each one). All four were fixed in src/; kept as regression tests.

TEST_CASE("jit bug 1: float32 log of x < 0.5", "[jit][ops][bugs]" KILN_NEEDS_LLVM) {
  check_against_reference([](Tensor x) { return kiln::log(x); },
                          {make_array_from({4}, DType::f32, {0.25, 0.4999, 1e-30, 0.75})},
                          {.label = "log(x < 0.5)"});
}

TEST_CASE("jit bug 2: float16/bfloat16 are rounded only when stored",
          "[jit][ops][bugs]" KILN_NEEDS_LLVM) {
  // 1 + erf(x / sqrt 2) cancels: rounding erf to bfloat16 first loses everything.
  check_against_reference([](Tensor x) { return kiln::gelu(x); },
                          {make_array_from({2}, DType::bf16, {-2.5, -3.0})},
                          {.label = "gelu bf16"});
  check_against_reference([](Tensor x) { return kiln::layer_norm(x); },
                          {make_array_from({1, 2}, DType::bf16, {1.5, 1.5234375})},
                          {.label = "layer_norm bf16"});
}

TEST_CASE("jit bug 3: integer pow wraps", "[jit][ops][bugs]" KILN_NEEDS_LLVM) {
  check_against_reference([](Tensor x) { return kiln::pow(x, 3.0); },
                          {make_array_from({2}, DType::i8, {9, 2})}, {.label = "int8 pow"});
}

TEST_CASE("jit bug 4: float -> int casts truncate and wrap", "[jit][ops][bugs]" KILN_NEEDS_LLVM) {
  check_against_reference([](Tensor x) { return x.astype(DType::i8); },
                          {make_array_from({2}, DType::f32, {65520, 300.5})},
                          {.label = "f32 -> i8"});
}
