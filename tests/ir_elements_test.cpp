// The reference interpreter's element conversions: float16/bfloat16 to and from float and double
// (half.h, every value and midpoint), round_to_dtype, and HostTensor's conversion from and to
// Arrays of any strides and every dtype.
#include <kiln/array.h>
#include <kiln/errors.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "interp_test_util.h"
#include "ir/interpreter.h"
#include "support/half.h"

using namespace kiln;
using namespace kiln::ir;
using namespace interp_test;

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
