// Reference interpreter: hand-checked cases for every op, the rounding rule, float16/bfloat16
// conversions (half.h), strided Array conversion, zero-size shapes, and the builder's errors.
#include <kiln/array.h>
#include <kiln/errors.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "support/half.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

HostTensor ht(DType t, std::vector<int64_t> shape, std::vector<double> v) {
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.values = std::move(v);
  return h;
}

NodePtr in(int64_t arg, DType t, std::vector<int64_t> shape) {
  return make_input(arg, t, concrete_shape(shape));
}

NodePtr const_f64(std::vector<int64_t> shape, const std::vector<double>& v) {
  std::vector<uint8_t> bytes(v.size() * 8);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return make_constant(DType::f64, concrete_shape(shape), std::move(bytes));
}

// Runs a graph with one output.
HostTensor run(const NodePtr& out, std::vector<NodePtr> inputs, std::vector<HostTensor> values) {
  Graph g;
  g.inputs = std::move(inputs);
  g.outputs = {out};
  auto r = interpret(g, values);
  REQUIRE(r.size() == 1);
  return r[0];
}

// Unary op on a 1-d f64 input.
std::vector<double> unary(Op op, std::vector<double> v, DType t = DType::f64) {
  const int64_t n = static_cast<int64_t>(v.size());
  NodePtr x = in(0, t, {n});
  return run(make_unary(op, x), {x}, {ht(t, {n}, std::move(v))}).values;
}

std::vector<double> binary(Op op, std::vector<double> a, std::vector<double> b,
                           DType t = DType::f64) {
  const int64_t n = static_cast<int64_t>(a.size());
  NodePtr x = in(0, t, {n}), y = in(1, t, {n});
  return run(make_binary(op, x, y), {x, y}, {ht(t, {n}, std::move(a)), ht(t, {n}, std::move(b))})
      .values;
}

bool same(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) return false;
    if (!std::isnan(want[i]) && got[i] != want[i]) return false;
  }
  return true;
}

std::vector<double> iota(int64_t n, double start = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i);
  return v;
}

}  // namespace

// ---------------------------------------------------------------- half.h

TEST_CASE("half: float <-> f16 known bit patterns", "[interp][half]") {
  CHECK(float_to_f16_bits(1.0f) == 0x3c00);
  CHECK(float_to_f16_bits(-2.0f) == 0xc000);
  CHECK(float_to_f16_bits(0.0f) == 0x0000);
  CHECK(float_to_f16_bits(-0.0f) == 0x8000);
  CHECK(float_to_f16_bits(0.1f) == 0x2e66);
  CHECK(float_to_f16_bits(65504.0f) == 0x7bff);  // max finite
  CHECK(float_to_f16_bits(65519.0f) == 0x7bff);  // below the tie
  CHECK(float_to_f16_bits(65520.0f) == 0x7c00);  // the tie rounds to even: inf
  CHECK(float_to_f16_bits(1e10f) == 0x7c00);
  CHECK(float_to_f16_bits(-kInf) == 0xfc00);
  CHECK(float_to_f16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(float_to_f16_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(float_to_f16_bits(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: 0
  CHECK(float_to_f16_bits(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_f16_bits(std::ldexp(3.0f, -25)) == 0x0002);         // tie 1.5 units -> 2 (even)
  CHECK(float_to_f16_bits(std::ldexp(1023.0f, -24)) == 0x03ff);      // largest subnormal
  CHECK(float_to_f16_bits(std::ldexp(1023.5f, -24)) == 0x0400);      // rounds up into the normals
  CHECK(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie -> even
  CHECK(float_to_f16_bits(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);  // tie -> even (up)
  CHECK(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);
  const uint16_t nan = float_to_f16_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK((float_to_f16_bits(std::bit_cast<float>(0x7f800001u)) & 0x03ff) != 0);  // sNaN stays NaN

  CHECK(f16_bits_to_float(0x3c00) == 1.0f);
  CHECK(f16_bits_to_float(0x3555) == 0.333251953125f);
  CHECK(f16_bits_to_float(0x7bff) == 65504.0f);
  CHECK(f16_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_bits_to_float(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(f16_bits_to_float(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(f16_bits_to_float(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(f16_bits_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f16_bits_to_float(0x7e00)));
  CHECK(std::signbit(f16_bits_to_float(0x8000)));
}

TEST_CASE("half: every f16 value round-trips and every midpoint rounds to even", "[interp][half]") {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = f16_bits_to_float(h);
    if (std::isnan(f)) {
      CHECK(std::isnan(f16_bits_to_float(float_to_f16_bits(f))));
      continue;
    }
    REQUIRE(float_to_f16_bits(f) == h);
    REQUIRE(double_to_f16_bits(f) == h);
    REQUIRE(round_to_f16(f) == static_cast<double>(f));
    // Midpoint between this positive finite value and the next one.
    if (h < 0x7bff) {
      const float next = f16_bits_to_float(static_cast<uint16_t>(h + 1));
      const double mid = (static_cast<double>(f) + next) / 2;
      const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
      REQUIRE(float_to_f16_bits(static_cast<float>(mid)) == even);
      REQUIRE(double_to_f16_bits(mid) == even);
      // Just above / below the midpoint goes to the nearer neighbour.
      REQUIRE(double_to_f16_bits(std::nextafter(mid, kInf)) == h + 1);
      REQUIRE(double_to_f16_bits(std::nextafter(mid, 0.0)) == h);
    }
  }
}

TEST_CASE("half: float <-> bf16 known bit patterns", "[interp][half]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bf16_bits(-1.0f) == 0xbf80);
  CHECK(float_to_bf16_bits(3.14159265f) == 0x4049);
  CHECK(float_to_bf16_bits(0.1f) == 0x3dcd);
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie -> even
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie -> even (up)
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // overflow: inf
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x00010000u)) == 0x0001);  // subnormal
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7fc0);
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);  // sNaN -> qNaN
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0xff800000u)) == 0xff80);  // -inf
  CHECK(bf16_bits_to_float(0x3f80) == 1.0f);
  CHECK(bf16_bits_to_float(0x3dcd) == 0.10009765625f);
  CHECK(bf16_bits_to_float(0x0001) == std::bit_cast<float>(0x00010000u));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = bf16_bits_to_float(h);
    if (std::isnan(f)) continue;
    REQUIRE(float_to_bf16_bits(f) == h);
    REQUIRE(double_to_bf16_bits(f) == h);
  }
}

TEST_CASE("half: a double is rounded once, not through float", "[interp][half]") {
  // 1 + 2^-11 + 2^-40: through float it becomes the tie 1 + 2^-11 and rounds down to 1.0.
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(double_to_f16_bits(v) == 0x3c01);
  CHECK(round_to_f16(v) == 1.0 + std::ldexp(1.0, -10));
  CHECK(round_to_f16(65520.0) == kInf);
  CHECK(round_to_f16(-65519.0) == -65504.0);
  CHECK(round_to_f16(std::ldexp(1.0, -26)) == 0.0);
  CHECK(round_to_bf16(0.1) == 0.10009765625);
  CHECK(round_to_bf16(1e39) == kInf);
  CHECK(std::isnan(round_to_bf16(kNaN)));
}

// ---------------------------------------------------------------- round_to_dtype

TEST_CASE("round_to_dtype: integers wrap, bool is != 0, floats round to nearest even",
          "[interp][round]") {
  CHECK(round_to_dtype(128, DType::i8) == -128);
  CHECK(round_to_dtype(300, DType::i8) == 44);
  CHECK(round_to_dtype(-129, DType::i8) == 127);
  CHECK(round_to_dtype(-2.7, DType::i8) == -2);  // truncates toward zero
  CHECK(round_to_dtype(2.7, DType::i32) == 2);
  CHECK(round_to_dtype(2147483648.0, DType::i32) == -2147483648.0);
  CHECK(round_to_dtype(4294967297.0, DType::i32) == 1);
  CHECK(round_to_dtype(9223372036854775808.0, DType::i64) == -9223372036854775808.0);
  CHECK(round_to_dtype(18446744073709551616.0 * 3 + 16384, DType::i64) == 16384);
  CHECK(round_to_dtype(-18446744073709551616.0 - 4096, DType::i64) == -4096);
  CHECK(round_to_dtype(1e30, DType::i8) == 0);  // the double 1e30 is a multiple of 2^47
  CHECK(round_to_dtype(kNaN, DType::i32) == 0);
  CHECK(round_to_dtype(kInf, DType::i64) == 0);
  CHECK(round_to_dtype(0.5, DType::boolean) == 1);
  CHECK(round_to_dtype(-3, DType::boolean) == 1);
  CHECK(round_to_dtype(0, DType::boolean) == 0);
  CHECK(round_to_dtype(kNaN, DType::boolean) == 1);
  CHECK(round_to_dtype(0.1, DType::f32) == static_cast<double>(0.1f));
  CHECK(round_to_dtype(1e39, DType::f32) == kInf);
  CHECK(round_to_dtype(-1e39, DType::f32) == -kInf);
  CHECK(round_to_dtype(3.4028235e38, DType::f32) ==
        static_cast<double>(std::numeric_limits<float>::max()));
  CHECK(std::isnan(round_to_dtype(kNaN, DType::f32)));
  CHECK(round_to_dtype(0.1, DType::f64) == 0.1);
  CHECK(round_to_dtype(0.1, DType::f16) == 0.0999755859375);
  CHECK(round_to_dtype(0.1, DType::bf16) == 0.10009765625);
  CHECK(round_to_dtype(1e-8, DType::f16) == 0.0);
  CHECK(round_to_dtype(70000, DType::f16) == kInf);
}

// ---------------------------------------------------------------- elementwise

TEST_CASE("interp: unary ops", "[interp][unary]") {
  CHECK(same(unary(Op::Neg, {1, -2, 0}), {-1, 2, 0}));
  CHECK(same(unary(Op::Abs, {-1.5, 2}), {1.5, 2}));
  CHECK(same(unary(Op::Exp, {0, 1}), {1, std::exp(1.0)}));
  CHECK(same(unary(Op::Log, {1, std::exp(2.0), 0, -1}), {0, 2, -kInf, kNaN}));
  CHECK(same(unary(Op::Sqrt, {4, 2}), {2, std::sqrt(2.0)}));
  CHECK(same(unary(Op::Rsqrt, {4, 0}), {0.5, kInf}));
  CHECK(same(unary(Op::Tanh, {0, 1}), {0, std::tanh(1.0)}));
  CHECK(same(unary(Op::Sigmoid, {0, 2}), {0.5, 1 / (1 + std::exp(-2.0))}));
  CHECK(same(unary(Op::Relu, {-1, 0, 3, kNaN}), {0, 0, 3, kNaN}));
  CHECK(same(unary(Op::Erf, {0, 1}), {0, std::erf(1.0)}));
  CHECK(same(unary(Op::Square, {-3, 0.5}), {9, 0.25}));
  CHECK(same(unary(Op::Not, {0, 1}, DType::boolean), {1, 0}));
  // float32 results are rounded to float.
  CHECK(same(unary(Op::Exp, {1}, DType::f32), {static_cast<double>(std::exp(1.0f))}));
}

TEST_CASE("interp: integer unary ops wrap", "[interp][unary][int]") {
  CHECK(same(unary(Op::Abs, {-128, -5}, DType::i8), {-128, 5}));
  CHECK(same(unary(Op::Neg, {-128, 5}, DType::i8), {-128, -5}));
  CHECK(same(unary(Op::Square, {16, -12}, DType::i8), {0, -112}));  // 256 -> 0, 144 -> -112
  CHECK(same(unary(Op::Relu, {-3, 4}, DType::i32), {0, 4}));
  // exp of an int8 gives float16 (numpy), unrounded inside the graph but rounded at the output.
  NodePtr x = in(0, DType::i8, {1});
  NodePtr e = make_unary(Op::Exp, x);
  CHECK(e->dtype == DType::f16);
  CHECK(run(e, {x}, {ht(DType::i8, {1}, {1})}).values[0] == round_to_f16(std::exp(1.0)));
}

TEST_CASE("interp: binary ops", "[interp][binary]") {
  CHECK(same(binary(Op::Add, {1, 2}, {3, -4}), {4, -2}));
  CHECK(same(binary(Op::Sub, {1, 2}, {3, -4}), {-2, 6}));
  CHECK(same(binary(Op::Mul, {1.5, 2}, {3, -4}), {4.5, -8}));
  CHECK(same(binary(Op::Div, {1, 1, -1}, {4, 0, 0}), {0.25, kInf, -kInf}));
  CHECK(same(binary(Op::Pow, {2, 9}, {10, 0.5}), {1024, 3}));
  CHECK(same(binary(Op::Maximum, {1, 5, kNaN, 1}, {2, 3, 1, kNaN}), {2, 5, kNaN, kNaN}));
  CHECK(same(binary(Op::Minimum, {1, 5, kNaN, 1}, {2, 3, 1, kNaN}), {1, 3, kNaN, kNaN}));
  CHECK(same(binary(Op::Lt, {1, 2, 3, kNaN}, {2, 2, 2, 1}), {1, 0, 0, 0}));
  CHECK(same(binary(Op::Le, {1, 2, 3, kNaN}, {2, 2, 2, 1}), {1, 1, 0, 0}));
  CHECK(same(binary(Op::Gt, {1, 2, 3, kNaN}, {2, 2, 2, 1}), {0, 0, 1, 0}));
  CHECK(same(binary(Op::Ge, {1, 2, 3, kNaN}, {2, 2, 2, 1}), {0, 1, 1, 0}));
  CHECK(same(binary(Op::Eq, {1, 2, kNaN}, {2, 2, kNaN}), {0, 1, 0}));
  CHECK(same(binary(Op::Ne, {1, 2, kNaN}, {2, 2, kNaN}), {1, 0, 1}));
  CHECK(same(binary(Op::And, {0, 1, 0, 1}, {0, 0, 1, 1}, DType::boolean), {0, 0, 0, 1}));
  CHECK(same(binary(Op::Or, {0, 1, 0, 1}, {0, 0, 1, 1}, DType::boolean), {0, 1, 1, 1}));
  // Comparisons give bool.
  NodePtr a = in(0, DType::f32, {2}), b = in(1, DType::f32, {2});
  CHECK(make_binary(Op::Lt, a, b)->dtype == DType::boolean);
}

TEST_CASE("interp: integer binary ops wrap (int8 127 + 1 = -128)", "[interp][binary][int]") {
  CHECK(same(binary(Op::Add, {127, -128}, {1, -1}, DType::i8), {-128, 127}));
  CHECK(same(binary(Op::Mul, {64, 100}, {2, 3}, DType::i8), {-128, 44}));
  CHECK(same(binary(Op::Sub, {-2147483648.0}, {1}, DType::i32), {2147483647.0}));
  CHECK(same(binary(Op::Pow, {2, 3}, {7, 2}, DType::i8), {-128, 9}));
  CHECK(same(binary(Op::Pow, {2}, {31}, DType::i32), {-2147483648.0}));
  CHECK(same(binary(Op::Maximum, {-128, 5}, {127, 4}, DType::i8), {127, 5}));
  // Mixed int8 + int32 promotes to int32 (no wrap at 8 bits).
  NodePtr x = in(0, DType::i8, {1}), y = in(1, DType::i32, {1});
  NodePtr s = make_binary(Op::Add, x, y);
  CHECK(s->dtype == DType::i32);
  CHECK(run(s, {x, y}, {ht(DType::i8, {1}, {127}), ht(DType::i32, {1}, {1})}).values[0] == 128);
  // Integer true division gives float64.
  NodePtr d = make_binary(Op::Div, y, y);
  CHECK(d->dtype == DType::f64);
}

TEST_CASE("interp: broadcasting through the builder", "[interp][binary][broadcast]") {
  NodePtr a = in(0, DType::f32, {2, 3}), b = in(1, DType::f32, {3});
  NodePtr s = make_binary(Op::Add, a, b);
  REQUIRE(concrete_dims(s->shape) == std::vector<int64_t>{2, 3});
  auto r = run(s, {a, b},
               {ht(DType::f32, {2, 3}, {0, 1, 2, 3, 4, 5}), ht(DType::f32, {3}, {10, 20, 30})});
  CHECK(r.shape == std::vector<int64_t>{2, 3});
  CHECK(same(r.values, {10, 21, 32, 13, 24, 35}));
  // [2,1] * [1,3] -> [2,3]
  NodePtr c = in(0, DType::f64, {2, 1}), d = in(1, DType::f64, {1, 3});
  auto m = run(make_binary(Op::Mul, c, d), {c, d},
               {ht(DType::f64, {2, 1}, {2, 3}), ht(DType::f64, {1, 3}, {1, 10, 100})});
  CHECK(same(m.values, {2, 20, 200, 3, 30, 300}));
  // A scalar constant.
  NodePtr e = in(0, DType::f64, {2});
  auto k = run(make_binary(Op::Sub, e, make_scalar(1.5, DType::f64)), {e},
               {ht(DType::f64, {2}, {1, 2})});
  CHECK(same(k.values, {-0.5, 0.5}));
}

TEST_CASE("interp: where", "[interp][where]") {
  NodePtr c = in(0, DType::boolean, {2, 1}), a = in(1, DType::f64, {2, 2}),
          b = in(2, DType::f64, {2});
  NodePtr w = make_where(c, a, b);
  auto r = run(w, {c, a, b},
               {ht(DType::boolean, {2, 1}, {1, 0}), ht(DType::f64, {2, 2}, {1, 2, 3, 4}),
                ht(DType::f64, {2}, {-1, -2})});
  CHECK(same(r.values, {1, 2, -1, -2}));
}

TEST_CASE("interp: cast", "[interp][cast]") {
  NodePtr x = in(0, DType::f32, {5});
  HostTensor v = ht(DType::f32, {5}, {-2.75, 2.75, 300, 0, 0.5});
  CHECK(same(run(make_cast(x, DType::i32), {x}, {v}).values, {-2, 2, 300, 0, 0}));
  CHECK(same(run(make_cast(x, DType::i8), {x}, {v}).values, {-2, 2, 44, 0, 0}));
  CHECK(same(run(make_cast(x, DType::boolean), {x}, {v}).values, {1, 1, 1, 0, 1}));
  NodePtr y = in(0, DType::f64, {3});
  HostTensor w = ht(DType::f64, {3}, {0.1, kNaN, 1e300});
  CHECK(same(run(make_cast(y, DType::f16), {y}, {w}).values, {0.0999755859375, kNaN, kInf}));
  CHECK(same(run(make_cast(y, DType::bf16), {y}, {w}).values, {0.10009765625, kNaN, kInf}));
  CHECK(same(run(make_cast(y, DType::f32), {y}, {w}).values,
             {static_cast<double>(0.1f), kNaN, kInf}));
  // 0.1 truncates to 0, NaN gives 0, 1e300 is a multiple of 2^64 so it wraps to 0.
  CHECK(same(run(make_cast(y, DType::i64), {y}, {w}).values, {0, 0, 0}));
  NodePtr b = in(0, DType::boolean, {2});
  CHECK(same(run(make_cast(b, DType::f32), {b}, {ht(DType::boolean, {2}, {1, 0})}).values, {1, 0}));
}

TEST_CASE("interp: f16/bf16 intermediates are not rounded, casts and outputs are",
          "[interp][round]") {
  const double eps = std::ldexp(1.0, -11);  // 1 + 2^-11 is not a float16
  for (DType t : {DType::f16, DType::bf16}) {
    const double step = t == DType::f16 ? eps : std::ldexp(1.0, -8);
    NodePtr x = in(0, t, {1});
    NodePtr c = make_scalar(step, t);
    NodePtr sum = make_binary(Op::Add, x, c);
    HostTensor one = ht(t, {1}, {1.0});
    // (x + c) - x keeps the unrounded intermediate.
    CHECK(run(make_binary(Op::Sub, sum, x), {x}, {one}).values[0] == step);
    // eval_node of the add alone does not round ...
    HostTensor cv = ht(t, {1}, {step});
    CHECK(eval_node(*sum, {&one, &cv}).values[0] == 1.0 + step);
    // ... but the graph output is rounded to its dtype (tie -> even: 1.0).
    CHECK(run(sum, {x}, {one}).values[0] == 1.0);
    // A Cast to the half type rounds: cast(cast(x + c, f32), t) - x == 0.
    NodePtr round_trip = make_cast(make_cast(sum, DType::f32), t);
    CHECK(run(make_binary(Op::Sub, round_trip, x), {x}, {one}).values[0] == 0.0);
  }
}

// ---------------------------------------------------------------- views and concat

TEST_CASE("interp: expand, reshape, permute", "[interp][view]") {
  NodePtr x = in(0, DType::f64, {3, 1});
  auto e = run(make_expand(x, concrete_shape({2, 3, 2})), {x}, {ht(DType::f64, {3, 1}, {1, 2, 3})});
  CHECK(e.shape == std::vector<int64_t>{2, 3, 2});
  CHECK(same(e.values, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));

  NodePtr y = in(0, DType::f64, {2, 3});
  HostTensor yv = ht(DType::f64, {2, 3}, {0, 1, 2, 3, 4, 5});
  auto r = run(make_reshape(y, concrete_shape({3, 2})), {y}, {yv});
  CHECK(r.shape == std::vector<int64_t>{3, 2});
  CHECK(same(r.values, {0, 1, 2, 3, 4, 5}));
  auto p = run(make_permute(y, {1, 0}), {y}, {yv});
  CHECK(p.shape == std::vector<int64_t>{3, 2});
  CHECK(same(p.values, {0, 3, 1, 4, 2, 5}));

  // 3-d permute: output dim i is input dim perm[i].
  NodePtr z = in(0, DType::f64, {2, 3, 4});
  auto q = run(make_permute(z, {2, 0, 1}), {z}, {ht(DType::f64, {2, 3, 4}, iota(24))});
  REQUIRE(q.shape == std::vector<int64_t>{4, 2, 3});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k) CHECK(q.values[(i * 2 + j) * 3 + k] == j * 12 + k * 4 + i);
}

TEST_CASE("interp: slice with positive and negative steps", "[interp][view]") {
  NodePtr x = in(0, DType::f64, {5});
  HostTensor xv = ht(DType::f64, {5}, {10, 11, 12, 13, 14});
  CHECK(same(run(make_slice(x, {4}, {-1}, concrete_shape({5})), {x}, {xv}).values,
             {14, 13, 12, 11, 10}));
  CHECK(same(run(make_slice(x, {1}, {2}, concrete_shape({2})), {x}, {xv}).values, {11, 13}));
  CHECK(same(run(make_slice(x, {3}, {-3}, concrete_shape({2})), {x}, {xv}).values, {13, 10}));
  CHECK(run(make_slice(x, {0}, {1}, concrete_shape({0})), {x}, {xv}).values.empty());
  NodePtr y = in(0, DType::f64, {3, 4});
  auto s = run(make_slice(y, {2, 1}, {-2, 2}, concrete_shape({2, 2})), {y},
               {ht(DType::f64, {3, 4}, iota(12))});
  CHECK(same(s.values, {9, 11, 1, 3}));
}

TEST_CASE("interp: concat", "[interp][concat]") {
  NodePtr a = in(0, DType::f64, {2, 1}), b = in(1, DType::f64, {2, 2});
  auto r = run(make_concat({a, b}, 1), {a, b},
               {ht(DType::f64, {2, 1}, {1, 2}), ht(DType::f64, {2, 2}, {3, 4, 5, 6})});
  CHECK(r.shape == std::vector<int64_t>{2, 3});
  CHECK(same(r.values, {1, 3, 4, 2, 5, 6}));
  auto s = run(make_concat({b, a}, -1), {a, b},
               {ht(DType::f64, {2, 1}, {1, 2}), ht(DType::f64, {2, 2}, {3, 4, 5, 6})});
  CHECK(same(s.values, {3, 4, 1, 5, 6, 2}));
  NodePtr c = in(0, DType::f64, {1, 2}), d = in(1, DType::f64, {0, 2});
  auto t = run(make_concat({c, d, c}, 0), {c, d},
               {ht(DType::f64, {1, 2}, {7, 8}), ht(DType::f64, {0, 2}, {})});
  CHECK(t.shape == std::vector<int64_t>{2, 2});
  CHECK(same(t.values, {7, 8, 7, 8}));
}

TEST_CASE("interp: constants of every dtype", "[interp][constant]") {
  CHECK(same(run(const_f64({2}, {1.25, -3}), {}, {}).values, {1.25, -3}));
  CHECK(run(make_scalar(0.1, DType::f16), {}, {}).values[0] == 0.0999755859375);
  CHECK(run(make_scalar(0.1, DType::bf16), {}, {}).values[0] == 0.10009765625);
  CHECK(run(make_scalar(-5, DType::i8), {}, {}).values[0] == -5);
  CHECK(run(make_scalar(1 << 20, DType::i32), {}, {}).values[0] == 1 << 20);
  CHECK(run(make_scalar(-7, DType::i64), {}, {}).values[0] == -7);
  CHECK(run(make_scalar(2, DType::boolean), {}, {}).values[0] == 1);
  CHECK(run(make_scalar(0.1, DType::f32), {}, {}).values[0] == static_cast<double>(0.1f));
  CHECK(run(make_scalar(0.1, DType::f32), {}, {}).shape.empty());
}

// ---------------------------------------------------------------- reductions

TEST_CASE("interp: reductions keepdims and not", "[interp][reduce]") {
  NodePtr x = in(0, DType::f64, {2, 3});
  HostTensor xv = ht(DType::f64, {2, 3}, {1, 5, 3, 4, 2, 6});
  auto s = run(make_reduce(Op::ReduceSum, x, {1}, true), {x}, {xv});
  CHECK(s.shape == std::vector<int64_t>{2, 1});
  CHECK(same(s.values, {9, 12}));
  auto s0 = run(make_reduce(Op::ReduceSum, x, {0}, false), {x}, {xv});
  CHECK(s0.shape == std::vector<int64_t>{3});
  CHECK(same(s0.values, {5, 7, 9}));
  auto all = run(make_reduce(Op::ReduceSum, x, {1, 0}, false), {x}, {xv});
  CHECK(all.shape.empty());
  CHECK(same(all.values, {21}));
  CHECK(same(run(make_reduce(Op::ReduceMean, x, {-1}, true), {x}, {xv}).values, {3, 4}));
  CHECK(same(run(make_reduce(Op::ReduceMax, x, {1}, true), {x}, {xv}).values, {5, 6}));
  CHECK(same(run(make_reduce(Op::ReduceMin, x, {0}, true), {x}, {xv}).values, {1, 2, 3}));

  NodePtr z = in(0, DType::f64, {2, 3, 2});
  auto m =
      run(make_reduce(Op::ReduceMax, z, {0, 2}, true), {z}, {ht(DType::f64, {2, 3, 2}, iota(12))});
  CHECK(m.shape == std::vector<int64_t>{1, 3, 1});
  CHECK(same(m.values, {7, 9, 11}));
}

TEST_CASE("interp: max/min propagate NaN", "[interp][reduce]") {
  NodePtr x = in(0, DType::f64, {2, 3});
  HostTensor xv = ht(DType::f64, {2, 3}, {1, kNaN, 3, 4, 5, kNaN});
  CHECK(same(run(make_reduce(Op::ReduceMax, x, {1}, false), {x}, {xv}).values, {kNaN, kNaN}));
  CHECK(same(run(make_reduce(Op::ReduceMin, x, {0}, false), {x}, {xv}).values, {1, kNaN, kNaN}));
  HostTensor first_nan = ht(DType::f64, {2, 3}, {kNaN, 1, 2, 3, 4, 5});
  CHECK(same(run(make_reduce(Op::ReduceMax, x, {1}, false), {x}, {first_nan}).values, {kNaN, 5}));
}

TEST_CASE("interp: sum accumulates in double, integer sums promote", "[interp][reduce]") {
  // In float32, 1e8 + 1 == 1e8; the oracle sums in double and gets the exact answer.
  NodePtr x = in(0, DType::f32, {3});
  CHECK(run(make_reduce(Op::ReduceSum, x, {0}, false), {x}, {ht(DType::f32, {3}, {1e8, 1, -1e8})})
            .values[0] == 1);
  // int8 sums give int64 (numpy), so they do not wrap at 8 bits.
  NodePtr y = in(0, DType::i8, {3});
  NodePtr s = make_reduce(Op::ReduceSum, y, {0}, false);
  CHECK(s->dtype == DType::i64);
  CHECK(run(s, {y}, {ht(DType::i8, {3}, {127, 127, 127})}).values[0] == 381);
  // Mean of ints gives float64.
  NodePtr m = make_reduce(Op::ReduceMean, y, {0}, false);
  CHECK(m->dtype == DType::f64);
  CHECK(run(m, {y}, {ht(DType::i8, {3}, {1, 2, 2})}).values[0] == 5.0 / 3.0);
  // bool sums count.
  NodePtr b = in(0, DType::boolean, {4});
  CHECK(run(make_reduce(Op::ReduceSum, b, {0}, false), {b}, {ht(DType::boolean, {4}, {1, 0, 1, 1})})
            .values[0] == 3);
}

// ---------------------------------------------------------------- matmul

TEST_CASE("interp: matmul", "[interp][matmul]") {
  NodePtr a = in(0, DType::f64, {2, 3}), b = in(1, DType::f64, {3, 2});
  auto r = run(
      make_matmul(a, b), {a, b},
      {ht(DType::f64, {2, 3}, {1, 2, 3, 4, 5, 6}), ht(DType::f64, {3, 2}, {7, 8, 9, 10, 11, 12})});
  CHECK(r.shape == std::vector<int64_t>{2, 2});
  CHECK(same(r.values, {58, 64, 139, 154}));
}

TEST_CASE("interp: batched matmul with a broadcast operand", "[interp][matmul]") {
  NodePtr a = in(0, DType::f64, {2, 2, 3}), b = in(1, DType::f64, {3, 2});
  NodePtr m = make_matmul(a, b);
  REQUIRE(concrete_dims(m->shape) == std::vector<int64_t>{2, 2, 2});
  auto r = run(m, {a, b},
               {ht(DType::f64, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 0, 1}),
                ht(DType::f64, {3, 2}, {7, 8, 9, 10, 11, 12})});
  CHECK(same(r.values, {58, 64, 139, 154, 7, 8, 11, 12}));
  // [2,1,2,1] x [3,1,2] -> batch [2,3]
  NodePtr c = in(0, DType::f64, {2, 1, 2, 1}), d = in(1, DType::f64, {3, 1, 2});
  NodePtr n = make_matmul(c, d);
  REQUIRE(concrete_dims(n->shape) == std::vector<int64_t>{2, 3, 2, 2});
  auto q = run(n, {c, d},
               {ht(DType::f64, {2, 1, 2, 1}, {1, 2, 3, 4}), ht(DType::f64, {3, 1, 2}, iota(6))});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t mm = 0; mm < 2; ++mm)
        for (int64_t nn = 0; nn < 2; ++nn)
          CHECK(q.values[((i * 3 + j) * 2 + mm) * 2 + nn] == (i * 2 + mm + 1) * (j * 2 + nn));
}

TEST_CASE("interp: matmul of vectors and zero K", "[interp][matmul]") {
  NodePtr v = in(0, DType::f64, {3}), w = in(1, DType::f64, {3});
  auto dot = run(make_matmul(v, w), {v, w},
                 {ht(DType::f64, {3}, {1, 2, 3}), ht(DType::f64, {3}, {4, 5, 6})});
  CHECK(dot.shape.empty());
  CHECK(dot.values[0] == 32);
  NodePtr a = in(0, DType::f64, {2, 0}), b = in(1, DType::f64, {0, 3});
  auto z = run(make_matmul(a, b), {a, b}, {ht(DType::f64, {2, 0}, {}), ht(DType::f64, {0, 3}, {})});
  CHECK(z.shape == std::vector<int64_t>{2, 3});
  CHECK(same(z.values, std::vector<double>(6, 0.0)));
}

TEST_CASE("interp: 256x256 int32 matmul against a naive loop", "[interp][matmul]") {
  const int64_t n = 256;
  std::vector<double> av(n * n), bv(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    av[i] = static_cast<double>((i * 7) % 13 - 6);
    bv[i] = static_cast<double>((i * 5) % 11 - 5);
  }
  NodePtr a = in(0, DType::i32, {n, n}), b = in(1, DType::i32, {n, n});
  auto r = run(make_matmul(a, b), {a, b}, {ht(DType::i32, {n, n}, av), ht(DType::i32, {n, n}, bv)});
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i += 17)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += av[i * n + k] * bv[k * n + j];
      bad += r.values[i * n + j] != s;
    }
  CHECK(bad == 0);
}

// ---------------------------------------------------------------- conv2d

TEST_CASE("interp: conv2d with groups, dilation and padding (hand computed)", "[interp][conv]") {
  // x [1,2,3,3]: channel 0 = 1..9, channel 1 = all 10. w [2,1,2,2], groups 2, dilation 2, pad 1.
  std::vector<double> xv = iota(9, 1);
  xv.insert(xv.end(), 9, 10.0);
  NodePtr x = in(0, DType::f64, {1, 2, 3, 3}), w = in(1, DType::f64, {2, 1, 2, 2});
  HostTensor xt = ht(DType::f64, {1, 2, 3, 3}, xv);
  HostTensor wt = ht(DType::f64, {2, 1, 2, 2}, {1, 2, 3, 4, 1, 1, 1, 1});
  Conv2dParams p;
  p.padding[0] = p.padding[1] = 1;
  p.dilation[0] = p.dilation[1] = 2;
  p.groups = 2;
  NodePtr c = make_conv2d(x, w, p);
  REQUIRE(concrete_dims(c->shape) == std::vector<int64_t>{1, 2, 3, 3});
  auto r = run(c, {x, w}, {xt, wt});
  CHECK(same(r.values, {20, 36, 15, 36, 64, 26, 10, 16, 5,      // channel 0
                        10, 20, 10, 20, 40, 20, 10, 20, 10}));  // channel 1
  // Same with stride 2: outputs at (0,0), (0,2), (2,0), (2,2).
  p.stride[0] = p.stride[1] = 2;
  NodePtr c2 = make_conv2d(x, w, p);
  REQUIRE(concrete_dims(c2->shape) == std::vector<int64_t>{1, 2, 2, 2});
  CHECK(same(run(c2, {x, w}, {xt, wt}).values, {20, 15, 10, 5, 10, 10, 10, 10}));
}

TEST_CASE("interp: conv2d sums over channels, batches and output channels", "[interp][conv]") {
  // x [2,2,2,2], w [3,2,1,1] (a 1x1 conv is a matmul over channels).
  NodePtr x = in(0, DType::f64, {2, 2, 2, 2}), w = in(1, DType::f64, {3, 2, 1, 1});
  std::vector<double> xv = iota(16);
  std::vector<double> wv = {1, 2, -1, 0, 0, 3};
  auto r = run(make_conv2d(x, w, {}), {x, w},
               {ht(DType::f64, {2, 2, 2, 2}, xv), ht(DType::f64, {3, 2, 1, 1}, wv)});
  REQUIRE(r.shape == std::vector<int64_t>{2, 3, 2, 2});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < 3; ++o)
      for (int64_t s = 0; s < 4; ++s)
        CHECK(r.values[(n * 3 + o) * 4 + s] ==
              wv[o * 2] * xv[(n * 2 + 0) * 4 + s] + wv[o * 2 + 1] * xv[(n * 2 + 1) * 4 + s]);
  // 2x2 kernel, no padding, on a 3x3 input: out[i][j] = sum of the 2x2 window.
  NodePtr y = in(0, DType::f32, {1, 1, 3, 3}), k = in(1, DType::f32, {1, 1, 2, 2});
  auto q =
      run(make_conv2d(y, k, {}), {y, k},
          {ht(DType::f32, {1, 1, 3, 3}, iota(9, 1)), ht(DType::f32, {1, 1, 2, 2}, {1, 1, 1, 1})});
  CHECK(same(q.values, {12, 16, 24, 28}));
}

// ---------------------------------------------------------------- Array conversion

TEST_CASE("HostTensor::from_array with contiguous, transposed, negative and zero strides",
          "[interp][array]") {
  std::vector<float> data = {0, 1, 2, 3, 4, 5};
  auto c = HostTensor::from_array(Array::view(data.data(), {2, 3}, DType::f32));
  CHECK(c.shape == std::vector<int64_t>{2, 3});
  CHECK(same(c.values, {0, 1, 2, 3, 4, 5}));
  auto t = HostTensor::from_array(Array::view(data.data(), {3, 2}, DType::f32, {1, 3}));
  CHECK(same(t.values, {0, 3, 1, 4, 2, 5}));
  // Both dims reversed: the view starts at the last element.
  auto r = HostTensor::from_array(Array::view(data.data() + 5, {2, 3}, DType::f32, {-3, -1}));
  CHECK(same(r.values, {5, 4, 3, 2, 1, 0}));
  // Row reversed, every other column.
  auto s = HostTensor::from_array(Array::view(data.data() + 3, {2, 2}, DType::f32, {-3, 2}));
  CHECK(same(s.values, {3, 5, 0, 2}));
  // Broadcast (stride 0).
  auto b = HostTensor::from_array(Array::view(data.data(), {2, 3}, DType::f32, {0, 1}));
  CHECK(same(b.values, {0, 1, 2, 0, 1, 2}));
  // Zero-size and 0-d.
  auto z = HostTensor::from_array(Array::view(nullptr, {0, 3}, DType::f32));
  CHECK(z.shape == std::vector<int64_t>{0, 3});
  CHECK(z.values.empty());
  auto sc = HostTensor::from_array(Array::view(data.data() + 4, {}, DType::f32));
  CHECK(sc.numel() == 1);
  CHECK(sc.values[0] == 4);
}

TEST_CASE("HostTensor: from_array/to_array round trip every dtype", "[interp][array]") {
  SECTION("f16 bits") {
    std::vector<uint16_t> h = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00};
    auto t = HostTensor::from_array(Array::view(h.data(), {5}, DType::f16));
    CHECK(same(t.values, {1, -2, std::ldexp(1.0, -24), 65504, kInf}));
    t.values[0] = 0.1;  // written correctly rounded
    Array out = Array::empty({5}, DType::f16);
    t.to_array(out);
    const uint16_t* o = out.data<uint16_t>();
    CHECK(o[0] == 0x2e66);
    CHECK(o[1] == 0xc000);
    CHECK(o[2] == 0x0001);
    CHECK(o[4] == 0x7c00);
  }
  SECTION("bf16 bits") {
    std::vector<uint16_t> h = {0x3f80, 0x3dcd, 0xff80};
    auto t = HostTensor::from_array(Array::view(h.data(), {3}, DType::bf16));
    CHECK(same(t.values, {1, 0.10009765625, -kInf}));
    Array out = Array::empty({3}, DType::bf16);
    t.to_array(out);
    CHECK(std::memcmp(out.data(), h.data(), 6) == 0);
  }
  SECTION("integers, bool, f32, f64") {
    std::vector<int8_t> i8 = {-128, 127, 0};
    std::vector<int32_t> i32 = {-2147483647 - 1, 2147483647, 5};
    std::vector<int64_t> i64 = {-(int64_t(1) << 53), int64_t(1) << 53, -1};
    std::vector<uint8_t> bl = {1, 0, 1};
    std::vector<float> f32 = {0.1f, -std::numeric_limits<float>::infinity(), 3};
    std::vector<double> f64 = {0.1, 1e300, -0.0};
    auto check_round_trip = [](void* p, DType t, size_t bytes) {
      HostTensor h = HostTensor::from_array(Array::view(p, {3}, t));
      Array out = Array::empty({3}, t);
      h.to_array(out);
      CHECK(std::memcmp(out.data(), p, bytes) == 0);
      return h;
    };
    CHECK(same(check_round_trip(i8.data(), DType::i8, 3).values, {-128, 127, 0}));
    CHECK(same(check_round_trip(i32.data(), DType::i32, 12).values,
               {-2147483648.0, 2147483647.0, 5}));
    CHECK(same(check_round_trip(i64.data(), DType::i64, 24).values,
               {-9007199254740992.0, 9007199254740992.0, -1}));
    CHECK(same(check_round_trip(bl.data(), DType::boolean, 3).values, {1, 0, 1}));
    CHECK(same(check_round_trip(f32.data(), DType::f32, 12).values,
               {static_cast<double>(0.1f), -kInf, 3}));
    CHECK(same(check_round_trip(f64.data(), DType::f64, 24).values, {0.1, 1e300, 0}));
  }
  SECTION("to_array wraps, rounds and writes through strides") {
    HostTensor h = ht(DType::i8, {2, 2}, {128, 1, 2, 3});
    std::vector<int8_t> buf(4, 0);
    Array out = Array::view(buf.data(), {2, 2}, DType::i8, {1, 2});  // column-major
    h.to_array(out);
    CHECK(buf == std::vector<int8_t>{-128, 2, 1, 3});
    Array wrong = Array::empty({4}, DType::i8);
    CHECK_THROWS_AS(h.to_array(wrong), ShapeError);
    Array wrong_t = Array::empty({2, 2}, DType::i32);
    CHECK_THROWS_AS(h.to_array(wrong_t), DTypeError);
  }
}

// ---------------------------------------------------------------- zero-size, graphs, errors

TEST_CASE("interp: zero-size shapes", "[interp][zero]") {
  NodePtr x = in(0, DType::f32, {0, 3});
  HostTensor xv = ht(DType::f32, {0, 3}, {});
  auto e = run(make_unary(Op::Exp, make_binary(Op::Add, x, x)), {x}, {xv});
  CHECK(e.shape == std::vector<int64_t>{0, 3});
  CHECK(e.values.empty());
  auto s = run(make_reduce(Op::ReduceSum, x, {0}, true), {x}, {xv});
  CHECK(s.shape == std::vector<int64_t>{1, 3});
  CHECK(same(s.values, {0, 0, 0}));
  auto m = run(make_reduce(Op::ReduceMean, x, {0}, false), {x}, {xv});
  CHECK(same(m.values, {kNaN, kNaN, kNaN}));
  auto s1 = run(make_reduce(Op::ReduceMax, x, {1}, false), {x}, {xv});
  CHECK(s1.shape == std::vector<int64_t>{0});
  auto p = run(make_permute(x, {1, 0}), {x}, {xv});
  CHECK(p.shape == std::vector<int64_t>{3, 0});
  Array out = Array::empty({0, 3}, DType::f32);
  e.to_array(out);
}

TEST_CASE("interp: graphs with shared nodes, several outputs, inputs as outputs",
          "[interp][graph]") {
  NodePtr x = in(0, DType::f64, {2}), y = in(1, DType::f64, {2});
  NodePtr s = make_binary(Op::Add, x, y);
  NodePtr p = make_binary(Op::Mul, s, s);
  Graph g;
  g.inputs = {x, y};
  g.outputs = {p, s, x, p};
  auto r = interpret(g, {ht(DType::f64, {2}, {1, 2}), ht(DType::f64, {2}, {3, 4})});
  REQUIRE(r.size() == 4);
  CHECK(same(r[0].values, {16, 36}));
  CHECK(same(r[1].values, {4, 6}));
  CHECK(same(r[2].values, {1, 2}));
  CHECK(same(r[3].values, {16, 36}));
}

TEST_CASE("interp: inputs are checked by dtype and shape", "[interp][errors]") {
  NodePtr x = in(0, DType::f32, {2, 3});
  NodePtr y = make_unary(Op::Neg, x);
  Graph g;
  g.inputs = {x};
  g.outputs = {y};
  CHECK_THROWS_AS(interpret(g, {ht(DType::i32, {2, 3}, iota(6))}), DTypeError);
  CHECK_THROWS_WITH(interpret(g, {ht(DType::f32, {3, 2}, iota(6))}), Catch::Contains("input 0") &&
                                                                         Catch::Contains("[2,3]") &&
                                                                         Catch::Contains("[3,2]"));
  CHECK_THROWS_AS(interpret(g, {ht(DType::f32, {3, 2}, iota(6))}), ShapeError);
  CHECK_THROWS_AS(interpret(g, {}), ShapeError);
  CHECK_THROWS_AS(interpret(g, {ht(DType::f32, {2, 3}, iota(5))}), ShapeError);
}

TEST_CASE("interp: symbolic shapes are a CompileError", "[interp][errors]") {
  NodePtr x = make_input(0, DType::f32, {Dim::symbol(0), Dim::concrete(3)});
  Graph g;
  g.inputs = {x};
  g.outputs = {make_unary(Op::Neg, x)};
  CHECK_THROWS_AS(interpret(g, {ht(DType::f32, {2, 3}, iota(6))}), CompileError);
}

TEST_CASE("builder errors: typed, naming the shapes", "[interp][builder][errors]") {
  NodePtr a = in(0, DType::f32, {2, 3}), b = in(1, DType::f32, {4});
  CHECK_THROWS_AS(make_binary(Op::Add, a, b), ShapeError);
  CHECK_THROWS_WITH(make_binary(Op::Add, a, b), Catch::Contains("[2,3]") && Catch::Contains("[4]"));

  NodePtr m = in(0, DType::f32, {2, 3}), n = in(1, DType::f32, {4, 5});
  CHECK_THROWS_AS(make_matmul(m, n), ShapeError);
  CHECK_THROWS_WITH(make_matmul(m, n), Catch::Contains("contraction") && Catch::Contains("[2,3]") &&
                                           Catch::Contains("[4,5]"));

  CHECK_THROWS_AS(make_reduce(Op::ReduceSum, a, {2}, true), ShapeError);
  CHECK_THROWS_AS(make_reduce(Op::ReduceSum, a, {-3}, true), ShapeError);
  CHECK_THROWS_AS(make_reduce(Op::ReduceMax, a, {1, -1}, true), ShapeError);  // duplicate

  NodePtr x = in(0, DType::f32, {1, 3, 4, 4}), w = in(1, DType::f32, {2, 2, 3, 3});
  CHECK_THROWS_AS(make_conv2d(x, w, {}), ShapeError);
  CHECK_THROWS_WITH(make_conv2d(x, w, {}), Catch::Contains("3 channels"));
  Conv2dParams g3;
  g3.groups = 3;
  NodePtr w1 = in(1, DType::f32, {2, 1, 3, 3});
  CHECK_THROWS_AS(make_conv2d(x, w1, g3), ShapeError);  // 2 outputs not divisible by 3 groups

  NodePtr bl = in(0, DType::boolean, {2});
  CHECK_THROWS_AS(make_binary(Op::Sub, bl, bl), DTypeError);
}
