// Reference interpreter: hand-checked cases for every op, the rounding rule between ops, zero-size
// shapes, and the builder's errors. Element conversions (half.h, round_to_dtype, HostTensor's
// Array conversion): ir_elements_test.cpp.
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
#include "interp_test_util.h"
#include "ir/interpreter.h"
#include "support/half.h"

using namespace kiln;
using namespace kiln::ir;
using namespace interp_test;

namespace {

NodePtr in(int64_t arg, DType t, std::vector<int64_t> shape) {
  return make_input(arg, t, concrete_shape(shape));
}

NodePtr const_f64(std::vector<int64_t> shape, const std::vector<double>& v) {
  std::vector<uint8_t> bytes(v.size() * 8);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return make_constant(DType::f64, concrete_shape(shape), std::move(bytes));
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

std::vector<double> iota(int64_t n, double start = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i);
  return v;
}

}  // namespace

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

TEST_CASE("builder errors: shapes past 64 dims or 2^63 - 1 bytes, overflowing conv2d padding",
          "[interp][builder][errors]") {
  // An element count that wraps in int64 passed reshape's check ([4] -> [2^62 + 1, 4] is 4 mod
  // 2^64) and sent kernels past their buffers; a wrapped broadcast divided by zero at compile time.
  NodePtr x = in(0, DType::f32, {4});
  const int64_t big = (int64_t(1) << 62) + 1;
  CHECK_THROWS_AS(make_reshape(x, concrete_shape({big, 4})), ShapeError);
  CHECK_THROWS_WITH(make_reshape(x, concrete_shape({big, 4})),
                    Catch::Contains("reshape") && Catch::Contains("2^63 - 1"));
  CHECK_THROWS_WITH(make_expand(x, concrete_shape({int64_t(1) << 40, int64_t(1) << 40, 4})),
                    Catch::Contains("broadcast_to"));
  // Bytes count: 2^61 float32 elements are 2^63 bytes; 2^60 of them fit.
  CHECK_THROWS_AS(make_expand(x, concrete_shape({int64_t(1) << 59, 4})), ShapeError);
  CHECK_NOTHROW(make_expand(x, concrete_shape({int64_t(1) << 58, 4})));
  // A zero extent does not hide the others' overflow (numpy refuses such a shape too).
  NodePtr e = in(0, DType::f32, {0});
  CHECK_THROWS_AS(make_reshape(e, concrete_shape({0, int64_t(1) << 40, int64_t(1) << 40})),
                  ShapeError);
  CHECK_NOTHROW(make_reshape(e, concrete_shape({0, int64_t(1) << 20, int64_t(1) << 20})));
  // concatenate's extents along the axis add up checked (int8: 2^62 bytes each fits).
  NodePtr b8 = in(0, DType::i8, {1});
  NodePtr half = make_expand(b8, concrete_shape({int64_t(1) << 62}));
  CHECK_THROWS_WITH(make_concat({half, half}, 0), Catch::Contains("concatenate"));
  CHECK_THROWS_WITH(make_concat({half, half, half}, 0), Catch::Contains("concatenate"));
  // 64 dims are numpy's limit, and kiln's.
  NodePtr one = in(0, DType::f32, {1});
  CHECK_NOTHROW(make_reshape(one, concrete_shape(std::vector<int64_t>(64, 1))));
  CHECK_THROWS_WITH(make_reshape(one, concrete_shape(std::vector<int64_t>(65, 1))),
                    Catch::Contains("65 dims") && Catch::Contains("at most 64"));
  // conv2d: a padding whose double overflows was read as a kernel larger than the input.
  NodePtr img = in(0, DType::f32, {1, 1, 1, 1}), w = in(1, DType::f32, {1, 1, 1, 1});
  Conv2dParams huge;
  huge.padding[1] = 6148914691236517205;  // (2^64 - 1) / 3: twice it wraps
  CHECK_THROWS_WITH(make_conv2d(img, w, huge), Catch::Contains("overflow"));
  Conv2dParams wide;
  wide.dilation[0] = int64_t(1) << 62;
  NodePtr w3 = in(1, DType::f32, {1, 1, 3, 1});
  CHECK_THROWS_WITH(make_conv2d(img, w3, wide), Catch::Contains("overflow"));
  Conv2dParams padded;
  padded.padding[0] = padded.padding[1] = 2;
  CHECK(make_conv2d(img, w, padded)->shape == concrete_shape({1, 1, 5, 5}));
}
