// Integer kernels against the reference interpreter on values across the whole int64 and int32
// ranges: past 2^53 (where a double loses the low bits), at the ends (where sums and products
// wrap) and small ones, in every layout. Elementwise ops, comparisons, casts, the rows, columns and
// split reduction kernels, matmul and pow; the comparison of each element is exact.
#include "ir/host_tensor.h"
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <limits>

using namespace jt;
using kiln::Tensor;

namespace {

// An int64 or int32 value: anywhere in the dtype's range, near its ends, near +-2^53, or small.
int64_t wide_int(Rng& rng, DType t) {
  const bool i64 = t == DType::i64;
  const int64_t lo =
      i64 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
  const int64_t hi =
      i64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
  const int64_t near53 = int64_t{1} << 53;
  switch (uniform_int(rng, 0, 4)) {
    case 0:
      return uniform_int(rng, hi - 3, hi);
    case 1:
      return uniform_int(rng, lo, lo + 3);
    case 2:
      if (i64) return (uniform_int(rng, 0, 1) ? near53 : -near53) + uniform_int(rng, -3, 3);
      return uniform_int(rng, -9, 9);
    case 3:
      return uniform_int(rng, -9, 9);
    default:
      return uniform_int(rng, lo, hi);
  }
}

// A random array of `shape` in `layout` holding value(rng) at each element (written exactly).
template <typename Value>
TestArray int_array(Rng& rng, std::vector<int64_t> shape, DType t, Layout layout, Value value) {
  TestArray a = make_array(rng, shape, t, layout);
  auto* base = static_cast<uint8_t*>(a.array.data());
  const int64_t esize = static_cast<int64_t>(kiln::dtype_size(t));
  kiln::ir::for_each_offset(a.array.shape(), a.array.strides(), 0, [&](int64_t off) {
    kiln::ir::encode_int_element(t, value(rng), base + off * esize);
  });
  return a;
}

TestArray wide_array(Rng& rng, std::vector<int64_t> shape, DType t, Layout layout) {
  return int_array(rng, shape, t, layout, [t](Rng& r) { return wide_int(r, t); });
}

std::vector<int64_t> shape_of(Rng& rng, int rank) {
  std::vector<int64_t> s;
  for (int i = 0; i < rank; ++i) s.push_back(random_dim(rng, /*allow_zero=*/i == 0, 40));
  return s;
}

}  // namespace

TEST_CASE(
    "jit ints: elementwise ops, comparisons and casts are exact across the int64 and int32 "
    "ranges",
    "[jit][ints]" KILN_NEEDS_LLVM) {
  for (DType t : {DType::i64, DType::i32}) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      Rng rng(seed * 31 + 5);
      const auto shape = shape_of(rng, static_cast<int>(seed % 3) + 1);
      TestArray x = wide_array(rng, shape, t, layout_n(seed));
      TestArray y = wide_array(rng, shape, t, layout_n(seed + 2));
      const std::string l = label("ints", t, seed);
      check_against_reference(
          [](Tensor a, Tensor b) {
            return std::vector<Tensor>{a + b, a - b, a * b, a * b + a};
          },
          {x, y}, {.label = l + " arith"});
      check_against_reference(
          [](Tensor a) {
            return std::vector<Tensor>{-a, kiln::abs(a), kiln::square(a), kiln::relu(a)};
          },
          {x}, {.label = l + " unary"});
      check_against_reference(
          [](Tensor a, Tensor b) {
            return std::vector<Tensor>{a < b, a == b, kiln::maximum(a, b), kiln::minimum(a, b),
                                       kiln::where(a > b, a, b - a)};
          },
          {x, y}, {.label = l + " compare"});
      check_against_reference(
          [](Tensor a) {
            return std::vector<Tensor>{a.astype(DType::f32),  a.astype(DType::f64),
                                       a.astype(DType::bf16), a.astype(DType::i32),
                                       a.astype(DType::i8),   a.astype(DType::boolean)};
          },
          {x}, {.label = l + " casts"});
    }
  }
}

TEST_CASE("jit ints: sums, max, min and matmul are exact (and wrap) across the int64 range",
          "[jit][ints]" KILN_NEEDS_LLVM) {
  auto reduce = [](Tensor x) {
    return std::vector<Tensor>{x.sum({1}), x.sum({0}), x.max({1}), x.min({0}), x.sum()};
  };
  for (DType t : {DType::i64, DType::i32}) {
    for (uint64_t seed = 0; seed < 5; ++seed) {
      Rng rng(seed * 7 + 1);
      // Rows and columns kernels on both sides of their tile widths (0 rows only for the sums'
      // sake: max and min of an empty axis are errors).
      const std::vector<int64_t> shape = {uniform_int(rng, 1, 70),
                                          pick(rng, std::vector<int64_t>{1, 7, 9, 33, 300})};
      TestArray x = wide_array(rng, shape, t, layout_n(seed));
      check_against_reference(reduce, {x}, {.label = label("int reductions", t, seed)});
    }
  }
  // A whole-tensor sum long enough to be split into partial sums (split_reductions), and a sum
  // over the kept-last-axis columns kernel of a wide matrix.
  Rng rng(99);
  TestArray big = wide_array(rng, {1 << 19}, DType::i64, Layout::contiguous);
  check_against_reference([](Tensor x) { return x.sum(); }, {big}, {.label = "split int64 sum"});
  TestArray wide = wide_array(rng, {37, 5000}, DType::i64, Layout::contiguous);
  check_against_reference([](Tensor x) { return x.sum({0}); }, {wide},
                          {.label = "columns int64 sum"});

  for (DType t : {DType::i64, DType::i32}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      Rng r(seed + 40);
      const int64_t m = uniform_int(r, 1, 9), k = uniform_int(r, 0, 13), n = uniform_int(r, 1, 11);
      TestArray a = wide_array(r, {m, k}, t, layout_n(seed));
      TestArray b = wide_array(r, {k, n}, t, layout_n(seed + 1));
      check_against_reference([](Tensor p, Tensor q) { return kiln::matmul(p, q); }, {a, b},
                              {.label = label("int matmul", t, seed)});
    }
  }
}

TEST_CASE("jit ints: integral C++ numbers past 2^53 reach the kernels exactly",
          "[jit][ints]" KILN_NEEDS_LLVM) {
  // 2^53 + 1 has no double; the inputs hold it and its neighbours (wide_int's values near 2^53).
  constexpr int64_t big = (int64_t{1} << 53) + 1;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Rng rng(seed * 17 + 11);
    TestArray x =
        wide_array(rng, shape_of(rng, static_cast<int>(seed % 3) + 1), DType::i64, layout_n(seed));
    check_against_reference(
        [](Tensor a) {
          return std::vector<Tensor>{a + big,
                                     big - a,
                                     a * big,
                                     a == big,
                                     a < big,
                                     a >= -big,
                                     kiln::clip(a, -9, 9) * big,
                                     kiln::pow(a, 3)};
        },
        {x}, {.label = label("integral scalars", DType::i64, seed)});
  }
}

TEST_CASE("jit ints: integer pow is exact past 2^53 and wraps, for run-time and constant exponents",
          "[jit][ints]" KILN_NEEDS_LLVM) {
  // Bases whose powers pass 2^53 and wrap (odd ones keep low bits set at every exponent), and
  // exponents across the bits the kernel's square-and-multiply walks, negative ones included.
  const auto base = [](Rng& r) {
    return uniform_int(r, 0, 3) ? uniform_int(r, -7, 7)
                                : pick(r, std::vector<int64_t>{10, 127, -128});
  };
  for (DType t : {DType::i64, DType::i32, DType::i8}) {
    const int64_t max_e = t == DType::i8    ? 127
                          : t == DType::i32 ? (int64_t{1} << 31) - 1
                                            : std::numeric_limits<int64_t>::max();
    const auto exponent = [max_e](Rng& r) {
      switch (uniform_int(r, 0, 3)) {
        case 0:
          return uniform_int(r, -3, 3);
        case 1:
          return uniform_int(r, 0, 70);
        case 2:
          return uniform_int(r, 0, max_e);
        default:
          return uniform_int(r, max_e - 2, max_e);
      }
    };
    for (uint64_t seed = 0; seed < 4; ++seed) {
      Rng rng(seed * 13 + 3);
      const auto shape = shape_of(rng, static_cast<int>(seed % 2) + 1);
      TestArray x = int_array(rng, shape, t, layout_n(seed), base);
      TestArray e = int_array(rng, shape, t, layout_n(seed + 1), exponent);
      check_against_reference(
          [](Tensor a, Tensor b) {
            return std::vector<Tensor>{kiln::pow(a, b), kiln::pow(a, 35.0), kiln::pow(a, 0.0),
                                       kiln::pow(a, 1.0), kiln::pow(a + 1, 63.0)};
          },
          {x, e}, {.label = label("int pow", t, seed)});
    }
  }
}
