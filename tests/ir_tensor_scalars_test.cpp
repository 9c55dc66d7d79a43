// C++ numbers beside a kiln::Tensor (src/ir/tensor_scalars.cpp), traced through the public API
// and run by the reference interpreter: integral numbers are exact past 2^53 and take numpy's
// dtypes; one outside an integer tensor's dtype is a DTypeError in arithmetic and a known answer
// in a comparison; an integral double outside the dtype acts as a float; clip clamps its bounds.
// The expected values are written here, element by element, independently of kiln.
#include <kiln/errors.h>
#include <kiln/tensor.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "interp_test_util.h"
#include "ir/builder.h"
#include "ir/host_tensor.h"

using namespace kiln;
using kiln::ir::HostTensor;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kTwo53 = int64_t{1} << 53;
constexpr int64_t kTwo60 = int64_t{1} << 60;

int64_t wrapping_add(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
}
int64_t wrapping_sub(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
}
int64_t wrapping_mul(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
}

// fn traced on a 1-d input of dtype t holding `ints`, run by the interpreter.
HostTensor run_on(DType t, std::vector<int64_t> ints, const std::function<Tensor(Tensor)>& fn) {
  HostTensor in;
  in.dtype = t;
  in.shape = {static_cast<int64_t>(ints.size())};
  in.ints = std::move(ints);
  ir::NodePtr x = ir::make_input(0, t, ir::concrete_shape(in.shape));
  Tensor out = fn(Tensor(x));
  return interp_test::run(out.node(), {x}, {in});
}

// The DTypeError message `fn` throws on an int8 tensor (empty when it throws nothing).
std::string error_of(DType t, const std::function<Tensor(Tensor)>& fn) {
  try {
    fn(Tensor(ir::make_input(0, t, ir::concrete_shape({3}))));
  } catch (const DTypeError& e) {
    return e.what();
  }
  return "";
}

const std::vector<int64_t> kI64 = {kTwo60 + 1, -kTwo53 - 3, kMax, kMin, 0};

}  // namespace

TEST_CASE("tensor scalars: an integral C++ number is exact past 2^53", "[interp][scalars]") {
  const int64_t big = kTwo53 + 1;  // no double holds it: through one it was 2^53
  std::vector<int64_t> sum, diff, rdiff, prod, eq, lt;
  for (int64_t v : kI64) {
    sum.push_back(wrapping_add(v, big));
    diff.push_back(wrapping_sub(v, big));
    rdiff.push_back(wrapping_sub(kTwo60 + 1, v));
    prod.push_back(wrapping_mul(v, big));
    eq.push_back(v == kTwo60 + 1);
    lt.push_back(v < kTwo60 + 1);
  }
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return x + big; }).ints == sum);
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return x - big; }).ints == diff);
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return (kTwo60 + 1) - x; }).ints == rdiff);
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return big * x; }).ints == prod);
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return x == kTwo60 + 1; }).ints == eq);
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return x < kTwo60 + 1; }).ints == lt);
  // Every integral type: unsigned, char, 64-bit unsigned in int64's range.
  CHECK(run_on(DType::i64, {1, 2}, [](Tensor x) { return x + uint64_t{kTwo60 + 3}; }).ints ==
        std::vector<int64_t>{kTwo60 + 4, kTwo60 + 5});
  CHECK(run_on(DType::i32, {1, 2}, [](Tensor x) { return x * 3u; }).ints ==
        std::vector<int64_t>{3, 6});
  CHECK(run_on(DType::i8, {1, 2}, [](Tensor x) { return x + char{5}; }).ints ==
        std::vector<int64_t>{6, 7});
  // A constant from an integral number.
  const HostTensor c =
      run_on(DType::i64, {0}, [&](Tensor x) { return x + scalar(big, DType::i64); });
  CHECK(c.ints == std::vector<int64_t>{big});
}

TEST_CASE("tensor scalars: an integral C++ number takes numpy's dtype", "[interp][scalars]") {
  auto dtype_of = [](DType t, const std::function<Tensor(Tensor)>& fn) {
    return fn(Tensor(ir::make_input(0, t, ir::concrete_shape({3})))).dtype();
  };
  CHECK(dtype_of(DType::i8, [](Tensor x) { return x + 3; }) == DType::i8);
  CHECK(dtype_of(DType::i32, [](Tensor x) { return 3 * x; }) == DType::i32);
  CHECK(dtype_of(DType::f16, [](Tensor x) { return x - 3; }) == DType::f16);
  CHECK(dtype_of(DType::bf16, [](Tensor x) { return kiln::pow(x, 3); }) == DType::bf16);
  CHECK(dtype_of(DType::boolean, [](Tensor x) { return x + 3; }) == DType::i64);
  CHECK(dtype_of(DType::i32, [](Tensor x) { return x / 2; }) == DType::f64);  // true division
  CHECK(dtype_of(DType::i8, [](Tensor x) { return x < 3; }) == DType::boolean);
  // Values: bool + int is int64; a float tensor's number is converted to its dtype.
  CHECK(run_on(DType::boolean, {1, 0}, [](Tensor x) { return x + 1000; }).ints ==
        std::vector<int64_t>{1001, 1000});
  const HostTensor f =
      run_on(DType::i32, {0}, [](Tensor x) { return x.astype(DType::f32) + 16777217; });
  CHECK(f.dtype == DType::f32);
  CHECK(f.values == std::vector<double>{16777216.0});  // 2^24 + 1 is rounded to float32
  // scalar(): exact for int64, != 0 for bool, a DTypeError outside an integer dtype.
  CHECK(run_on(DType::boolean, {0}, [](Tensor x) {
          return x == scalar(-1, DType::boolean);
        }).ints == std::vector<int64_t>{0});
  CHECK_THROWS_AS(scalar(300, DType::i8), DTypeError);
  CHECK_NOTHROW(scalar(-128, DType::i8));
}

TEST_CASE("tensor scalars: arithmetic with an integer outside the tensor's dtype is a DTypeError",
          "[interp][scalars]") {
  const std::string e = error_of(DType::i8, [](Tensor x) { return x + 128; });
  CHECK(e.find("the integer 128 is out of bounds for int8 (-128 to 127)") != std::string::npos);
  CHECK(e.find("add") != std::string::npos);
  CHECK(error_of(DType::i8, [](Tensor x) { return -129 * x; }).find("-129") != std::string::npos);
  CHECK(error_of(DType::i32, [](Tensor x) { return x - (int64_t{1} << 31); }) != "");
  CHECK(error_of(DType::i64, [](Tensor x) {
          return x + std::numeric_limits<uint64_t>::max();
        }).find("18446744073709551615") != std::string::npos);
  // True division is in float64, the number too (numpy's int8 x / 1000 is x / 1000.0).
  const HostTensor q = run_on(DType::i8, {5, -128}, [](Tensor x) { return x / 1000; });
  CHECK(q.dtype == DType::f64);
  CHECK(q.values == std::vector<double>{5 / 1000.0, -128 / 1000.0});
  CHECK(run_on(DType::i8, {5, -128}, [](Tensor x) { return 1000 / x; }).values ==
        std::vector<double>{200, 1000 / -128.0});
  CHECK(error_of(DType::i8, [](Tensor x) { return kiln::pow(x, 300); }).find("pow") !=
        std::string::npos);
  CHECK(error_of(DType::i8, [](Tensor x) { return kiln::pow(x, -1); }).find("negative") !=
        std::string::npos);
  // The ends of the range are in it.
  CHECK(run_on(DType::i8, {0, 1}, [](Tensor x) { return x + 127; }).ints ==
        std::vector<int64_t>{127, -128});  // wraps, as numpy's
  CHECK(run_on(DType::i8, {0, -1}, [](Tensor x) { return x + (-128); }).ints ==
        std::vector<int64_t>{-128, 127});
  CHECK(run_on(DType::i64, {1}, [](Tensor x) { return x + kMin; }).ints ==
        std::vector<int64_t>{kMin + 1});
}

TEST_CASE(
    "tensor scalars: a comparison with an integer outside the dtype answers for every element",
    "[interp][scalars]") {
  const std::vector<int64_t> v = {-128, -1, 0, 127};
  const std::vector<int64_t> all(4, 1), none(4, 0);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x < 1000; }).ints == all);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x <= 128; }).ints == all);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x > 128; }).ints == none);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x >= 1000; }).ints == none);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x > -129; }).ints == all);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x < -129; }).ints == none);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x == 128; }).ints == none);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x != 128; }).ints == all);
  // The number on the left.
  CHECK(run_on(DType::i8, v, [](Tensor x) { return 1000 > x; }).ints == all);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return -1000 >= x; }).ints == none);
  CHECK(run_on(DType::i8, v, [](Tensor x) { return 1000 <= x; }).ints == none);
  // Past int64: a uint64 number.
  const uint64_t u = std::numeric_limits<uint64_t>::max();
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return x < u; }).ints ==
        std::vector<int64_t>(5, 1));
  CHECK(run_on(DType::i64, kI64, [&](Tensor x) { return x == u; }).ints ==
        std::vector<int64_t>(5, 0));
  // In the range, each element is compared (127 is int8's largest).
  CHECK(run_on(DType::i8, v, [](Tensor x) { return x < 127; }).ints ==
        std::vector<int64_t>{1, 1, 1, 0});
  const HostTensor r = run_on(DType::i8, v, [](Tensor x) { return x < 1000; });
  CHECK(r.dtype == DType::boolean);
  CHECK(r.shape == std::vector<int64_t>{4});
}

TEST_CASE("tensor scalars: an integral double outside an integer tensor's dtype is a float",
          "[interp][scalars]") {
  // numpy: int8 x + 300.0 is float64 (it wrapped 300 to 44 in int8 before).
  const HostTensor sum = run_on(DType::i8, {1, -128}, [](Tensor x) { return x + 300.0; });
  CHECK(sum.dtype == DType::f64);
  CHECK(sum.values == std::vector<double>{301, 172});
  CHECK(run_on(DType::i8, {1, 127}, [](Tensor x) { return x < 1000.0; }).ints ==
        std::vector<int64_t>{1, 1});
  CHECK(run_on(DType::i8, {1, 127}, [](Tensor x) { return x == 2.0; }).ints ==
        std::vector<int64_t>{0, 0});
  CHECK(run_on(DType::i8, {2, 127}, [](Tensor x) { return x != 2.0; }).ints ==
        std::vector<int64_t>{0, 1});
  // Inside the range it keeps the dtype, as before.
  const HostTensor in = run_on(DType::i8, {1, 2}, [](Tensor x) { return x + 3.0; });
  CHECK(in.dtype == DType::i8);
  CHECK(in.ints == std::vector<int64_t>{4, 5});
  CHECK(run_on(DType::i8, {2, 3}, [](Tensor x) { return kiln::pow(x, 300.0); }).dtype ==
        DType::f64);
}

TEST_CASE("tensor scalars: integer pow and clip keep the integer dtype", "[interp][scalars]") {
  // pow with an integral exponent: exact, wrapping; 2 is a square.
  const HostTensor p =
      run_on(DType::i64, {3, -3, kTwo53 + 1}, [](Tensor x) { return kiln::pow(x, 3); });
  CHECK(p.dtype == DType::i64);
  CHECK(p.ints == std::vector<int64_t>{
                      27, -27, wrapping_mul(wrapping_mul(kTwo53 + 1, kTwo53 + 1), kTwo53 + 1)});
  CHECK(run_on(DType::i8, {12, -3}, [](Tensor x) { return kiln::pow(x, 2); }).ints ==
        std::vector<int64_t>{-112, 9});  // 144 wraps in int8
  // clip: an integral bound outside int8 bounds nothing on its side (it wrapped: -1000 is 24 and
  // 1000 is -24 in int8, and every element came out -24).
  const HostTensor c =
      run_on(DType::i8, {-128, 0, 127}, [](Tensor x) { return kiln::clip(x, -1000.0, 1000.0); });
  CHECK(c.dtype == DType::i8);
  CHECK(c.ints == std::vector<int64_t>{-128, 0, 127});
  CHECK(run_on(DType::i8, {-128, 0, 127}, [](Tensor x) { return kiln::clip(x, -5, 1000); }).ints ==
        std::vector<int64_t>{-5, 0, 127});
  CHECK(run_on(DType::i32, {-7, 70}, [](Tensor x) { return kiln::clip(x, 0.5, 6.0); }).dtype ==
        DType::f64);  // a fractional bound is a float, as in numpy
}
