// The reference interpreter on integers: int64 values past 2^53 (which have no double) and int32
// products past 2^53 stay exact through every integer op, and wrap as kiln's kernels wrap. The
// expected values are computed here with unsigned 64-bit arithmetic, independently of the
// interpreter.
#include <kiln/array.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "interp_test_util.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kTwo60 = int64_t{1} << 60;

int64_t add(int64_t x, int64_t y) { return static_cast<int64_t>(uint64_t(x) + uint64_t(y)); }
int64_t mul(int64_t x, int64_t y) { return static_cast<int64_t>(uint64_t(x) * uint64_t(y)); }

NodePtr in(int64_t arg, DType t, std::vector<int64_t> shape) {
  return make_input(arg, t, concrete_shape(shape));
}

// A tensor given by its exact elements only (`values` is completed from them).
HostTensor ints_tensor(DType t, std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.ints = std::move(v);
  return h;
}

// interp_test::run, its result holding integers in both forms.
HostTensor run(const NodePtr& out, std::vector<NodePtr> inputs, std::vector<HostTensor> values) {
  HostTensor r = interp_test::run(out, std::move(inputs), std::move(values));
  REQUIRE(r.ints.size() == (holds_ints(r.dtype) ? r.values.size() : 0));
  return r;
}

// x (op) y elementwise on int64 [5].
std::vector<int64_t> binary(Op op, std::vector<int64_t> a, std::vector<int64_t> b) {
  NodePtr x = in(0, DType::i64, {5}), y = in(1, DType::i64, {5});
  return run(make_binary(op, x, y), {x, y},
             {ints_tensor(DType::i64, {5}, a), ints_tensor(DType::i64, {5}, b)})
      .ints;
}

std::vector<int64_t> unary(Op op, std::vector<int64_t> a, DType t = DType::i64) {
  NodePtr x = in(0, t, {static_cast<int64_t>(a.size())});
  return run(make_unary(op, x), {x}, {ints_tensor(t, {static_cast<int64_t>(a.size())}, a)}).ints;
}

}  // namespace

TEST_CASE("interp ints: int64 past 2^53 is exact in elementwise ops and wraps at 2^64",
          "[interp][ints]") {
  const std::vector<int64_t> a = {kTwo60 + 1, 50031545098999707, -(int64_t{1} << 55) - 3, kMax,
                                  kMin};
  const std::vector<int64_t> b = {1, (int64_t{1} << 53) + 1, 7, 1, -1};
  std::vector<int64_t> sum(5), diff(5), prod(5), hi(5), lo(5), lt(5), eq(5);
  for (size_t i = 0; i < 5; ++i) {
    sum[i] = add(a[i], b[i]);
    diff[i] = add(a[i], -b[i]);
    prod[i] = mul(a[i], b[i]);
    hi[i] = std::max(a[i], b[i]);
    lo[i] = std::min(a[i], b[i]);
    lt[i] = a[i] < b[i];
    eq[i] = a[i] == b[i];
  }
  CHECK(binary(Op::Add, a, b) == sum);  // kMax + 1 wraps to kMin
  CHECK(binary(Op::Sub, a, b) == diff);
  CHECK(binary(Op::Mul, a, b) == prod);
  CHECK(binary(Op::Maximum, a, b) == hi);
  CHECK(binary(Op::Minimum, a, b) == lo);
  CHECK(binary(Op::Lt, a, b) == lt);
  CHECK(binary(Op::Eq, a, b) == eq);
  // Neighbours past 2^53 compare as different numbers (as doubles they were equal).
  CHECK(binary(Op::Eq, {kTwo60 + 1, kTwo60, kMax, kMax - 1, 3},
               {kTwo60, kTwo60, kMax - 1, kMax, 3}) == std::vector<int64_t>{0, 1, 0, 0, 1});
  CHECK(unary(Op::Neg, a) ==
        std::vector<int64_t>{-kTwo60 - 1, -50031545098999707, (int64_t{1} << 55) + 3, -kMax, kMin});
  CHECK(unary(Op::Abs, a) ==
        std::vector<int64_t>{kTwo60 + 1, 50031545098999707, (int64_t{1} << 55) + 3, kMax, kMin});
  CHECK(unary(Op::Square, {(int64_t{1} << 31) + 1, 3037000499, -94906267}) ==
        std::vector<int64_t>{mul((int64_t{1} << 31) + 1, (int64_t{1} << 31) + 1),
                             mul(3037000499, 3037000499), mul(94906267, 94906267)});
  CHECK(unary(Op::Relu, {kTwo60 + 1, -kTwo60 - 1, 0}) == std::vector<int64_t>{kTwo60 + 1, 0, 0});
}

TEST_CASE("interp ints: int32 products past 2^53 wrap exactly", "[interp][ints]") {
  // (2^31 - 1)^2 = 2^62 - 2^32 + 1: as a double its low bits were gone before the wrap.
  const int32_t m = std::numeric_limits<int32_t>::max();
  NodePtr x = in(0, DType::i32, {3}), y = in(1, DType::i32, {3});
  const HostTensor r = run(
      make_binary(Op::Mul, x, y), {x, y},
      {ints_tensor(DType::i32, {3}, {m, 46341, -m}), ints_tensor(DType::i32, {3}, {m, 46341, m})});
  CHECK(r.ints == std::vector<int64_t>{1, static_cast<int32_t>(46341LL * 46341LL), -1});
  CHECK(r.values == std::vector<double>{1, static_cast<int32_t>(46341LL * 46341LL), -1});
  CHECK(unary(Op::Square, {m, 65536}, DType::i32) == std::vector<int64_t>{1, 0});
}

TEST_CASE("interp ints: sums, max, matmul and conv2d of int64 past 2^53 are exact",
          "[interp][ints]") {
  NodePtr x = in(0, DType::i64, {2, 3});
  const HostTensor xv =
      ints_tensor(DType::i64, {2, 3}, {kTwo60 + 1, -kTwo60, 1, kMax, 1, kTwo60 + 3});
  CHECK(run(make_reduce(Op::ReduceSum, x, {1}, false), {x}, {xv}).ints ==
        std::vector<int64_t>{2, add(add(kMax, 1), kTwo60 + 3)});  // the second wraps
  CHECK(run(make_reduce(Op::ReduceMax, x, {0}, false), {x}, {xv}).ints ==
        std::vector<int64_t>{kMax, 1, kTwo60 + 3});
  CHECK(run(make_reduce(Op::ReduceMin, x, {1}, false), {x}, {xv}).ints ==
        std::vector<int64_t>{-kTwo60, 1});
  // int32 sums go to int64: (2^31 - 1) * 3 without wrapping.
  NodePtr s = in(0, DType::i32, {3});
  CHECK(run(make_reduce(Op::ReduceSum, s, {0}, false), {s},
            {ints_tensor(DType::i32, {3}, {2147483647, 2147483647, 2147483647})})
            .ints == std::vector<int64_t>{3 * int64_t{2147483647}});

  NodePtr a = in(0, DType::i64, {1, 2}), b = in(1, DType::i64, {2, 2});
  const int64_t p = (int64_t{1} << 40) + 1, q = (int64_t{1} << 20) + 3;
  const HostTensor mm = run(make_matmul(a, b), {a, b},
                            {ints_tensor(DType::i64, {1, 2}, {p, kTwo60 + 1}),
                             ints_tensor(DType::i64, {2, 2}, {q, 1, 1, kMax})});
  CHECK(mm.ints == std::vector<int64_t>{add(mul(p, q), kTwo60 + 1), add(p, mul(kTwo60 + 1, kMax))});

  Conv2dParams cp;
  NodePtr cx = in(0, DType::i64, {1, 1, 1, 2}), cw = in(1, DType::i64, {1, 1, 1, 2});
  const HostTensor conv = run(make_conv2d(cx, cw, cp), {cx, cw},
                              {ints_tensor(DType::i64, {1, 1, 1, 2}, {p, kTwo60 + 1}),
                               ints_tensor(DType::i64, {1, 1, 1, 2}, {q, 3})});
  CHECK(conv.ints == std::vector<int64_t>{add(mul(p, q), mul(kTwo60 + 1, 3))});
}

TEST_CASE("interp ints: integer pow is exact past 2^53 and wraps as numpy's", "[interp][ints]") {
  // The expected values are numpy's (np.int64 arrays; 3^35 has no double, 3^41 and 5^100 wrap).
  CHECK(binary(Op::Pow, {3, 3, 7, -3, 2}, {35, 41, 30, 39, 63}) ==
        std::vector<int64_t>{50031545098999707, -420491770248316829, 1576789505350337489,
                             -4052555153018976267, kMin});
  CHECK(binary(Op::Pow, {2, 5, 0, 4, 0}, {64, 100, 0, 0, 5}) ==
        std::vector<int64_t>{0, -3842938066129721103, 1, 1, 0});
  // A negative exponent (numpy refuses it): the integer part of the real power.
  CHECK(binary(Op::Pow, {1, -1, -1, 2, 0}, {-5, -5, -4, -1, -3}) ==
        std::vector<int64_t>{1, -1, 1, 0, 0});
  // int8 wraps in its own width (numpy: [-13, 13, 87, 16]).
  NodePtr x = in(0, DType::i8, {4}), y = in(1, DType::i8, {4});
  CHECK(
      run(make_binary(Op::Pow, x, y), {x, y},
          {ints_tensor(DType::i8, {4}, {3, -3, 7, 100}), ints_tensor(DType::i8, {4}, {5, 5, 3, 2})})
          .ints == std::vector<int64_t>{-13, 13, 87, 16});
}

TEST_CASE("interp ints: views, where and concat carry int64 past 2^53 exactly", "[interp][ints]") {
  NodePtr x = in(0, DType::i64, {2, 2});
  const HostTensor xv = ints_tensor(DType::i64, {2, 2}, {kTwo60 + 1, kTwo60 + 2, kMax, kMin + 1});
  CHECK(run(make_permute(x, {1, 0}), {x}, {xv}).ints ==
        std::vector<int64_t>{kTwo60 + 1, kMax, kTwo60 + 2, kMin + 1});
  CHECK(run(make_reshape(x, concrete_shape({4})), {x}, {xv}).ints == xv.ints);
  CHECK(run(make_slice(x, {1, 1}, {1, -1}, concrete_shape({1, 2})), {x}, {xv}).ints ==
        std::vector<int64_t>{kMin + 1, kMax});
  CHECK(run(make_expand(make_reshape(x, concrete_shape({1, 4})), concrete_shape({2, 4})), {x}, {xv})
            .ints.back() == kMin + 1);
  CHECK(run(make_concat({x, x}, 0), {x}, {xv}).ints.at(5) == kTwo60 + 2);
  NodePtr c = in(1, DType::boolean, {2, 2});
  CHECK(run(make_where(c, x, make_unary(Op::Neg, x)), {x, c},
            {xv, ints_tensor(DType::boolean, {2, 2}, {1, 0, 0, 1})})
            .ints == std::vector<int64_t>{kTwo60 + 1, -kTwo60 - 2, -kMax, kMin + 1});
}

TEST_CASE("interp ints: casts from int64 round once, to narrower integers wrap", "[interp][ints]") {
  // 2^60 + 2^36 + 1 is just above a float32 tie: rounded once it goes up to 2^60 + 2^37; by way
  // of a double it lands on the tie and goes to even, 2^60.
  const int64_t v = kTwo60 + (int64_t{1} << 36) + 1;
  REQUIRE(static_cast<float>(v) != static_cast<float>(static_cast<double>(v)));
  NodePtr x = in(0, DType::i64, {3});
  const HostTensor xv = ints_tensor(DType::i64, {3}, {v, kTwo60 + 5, -1});
  CHECK(run(make_cast(x, DType::f32), {x}, {xv}).values ==
        std::vector<double>{static_cast<float>(v), static_cast<float>(kTwo60 + 5), -1});
  CHECK(run(make_cast(x, DType::f64), {x}, {xv}).values ==
        std::vector<double>{static_cast<double>(v), static_cast<double>(kTwo60 + 5), -1});
  CHECK(run(make_cast(x, DType::i32), {x}, {xv}).ints == std::vector<int64_t>{1, 5, -1});
  CHECK(run(make_cast(x, DType::boolean), {x}, {xv}).ints == std::vector<int64_t>{1, 1, 1});
  // Float to int64 past 2^53 is exact too (a double's integer value).
  NodePtr f = in(0, DType::f64, {2});
  CHECK(run(make_cast(f, DType::i64), {f}, {interp_test::ht(DType::f64, {2}, {0x1p60, -0x1p62})})
            .ints == std::vector<int64_t>{kTwo60, -(int64_t{1} << 62)});
}

TEST_CASE("interp ints: integer constants and Arrays round-trip past 2^53", "[interp][ints]") {
  std::vector<int64_t> data = {kTwo60 + 1, kMax, kMin};
  std::vector<uint8_t> bytes(data.size() * 8);
  std::memcpy(bytes.data(), data.data(), bytes.size());
  NodePtr c = make_constant(DType::i64, concrete_shape({3}), bytes);
  CHECK(run(c, {}, {}).ints == data);

  HostTensor h = HostTensor::from_array(Array::view(data.data(), {3}, DType::i64));
  CHECK(h.ints == data);
  std::vector<int64_t> back(3, 0);
  Array out = Array::view(back.data(), {3}, DType::i64);
  h.to_array(out);
  CHECK(back == data);
}
