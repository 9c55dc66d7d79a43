// Differential tests of the C++ API's elementwise ops, reductions and norms: kiln::jit against the
// reference interpreter over seeded random shapes (0, 1, odd sizes, broadcasting), layouts
// (strided, transposed, offset, negative and zero strides) and every dtype each op takes. Each
// case compiles one kernel set, so the number of cases is budgeted (a few hundred compiles in
// all). Contractions and data movement: jit_ops_structure_test.cpp.
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

// ------------------------------------------------------------------------------------------------
// conv2d

// ------------------------------------------------------------------------------------------------
// Views and data movement

// ------------------------------------------------------------------------------------------------
// Outputs that are inputs, views of inputs, constants or repeated

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
