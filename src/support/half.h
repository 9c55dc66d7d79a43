// float16 and bfloat16 conversions, header-only: bit patterns to and from float (round to nearest
// even; NaN, infinities and subnormals handled), and correctly rounded double -> f16/bf16 values
// (rounding a double directly, not through float, so there is no double rounding).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln {

// float -> IEEE binary16 bits. NaN stays NaN (quieted, top payload bits kept); overflow gives inf.
inline uint16_t float_to_f16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN
    if (a == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                              // normal in f16 (>= 2^-14)
    a += 0xfffu + ((a >> 13) & 1u);                                    // round to nearest even
    return static_cast<uint16_t>(sign | ((a - 0x38000000u) >> 13));    // rebias 127 -> 15
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 (the tie) rounds to 0
  // Subnormal f16: the result counts units of 2^-24. The float is m * 2^(e - 150).
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // in [14, 24]
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal: fine
  return static_cast<uint16_t>(sign | h);
}

inline float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal, exact
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// float -> bfloat16 bits (the top half of the float, rounded to nearest even; NaN stays quiet NaN).
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

namespace detail {
// Rounds a double to the nearest value (ties to even) of a binary format with `digits` significand
// bits, smallest quantum 2^min_quantum_exp (the subnormal step) and overflow to inf at 2^max_exp.
inline double round_to_binary_format(double v, int digits, int min_quantum_exp, int max_exp) {
  if (!std::isfinite(v) || v == 0) return v;
  const double a = std::fabs(v);
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e with f in [0.5, 1)
  int q = e - digits;
  if (q < min_quantum_exp) q = min_quantum_exp;
  // Scaling by a power of two is exact; nearbyint rounds to nearest even in the default mode.
  double r = std::ldexp(std::nearbyint(std::ldexp(a, -q)), q);
  if (r >= std::ldexp(1.0, max_exp)) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, v);
}
}  // namespace detail

// The float16 value nearest to v (ties to even), as a double. NaN and +-inf pass through.
inline double round_to_f16(double v) { return detail::round_to_binary_format(v, 11, -24, 16); }
// The bfloat16 value nearest to v (ties to even), as a double.
inline double round_to_bf16(double v) { return detail::round_to_binary_format(v, 8, -133, 128); }

// double -> bits, correctly rounded (the rounded value is exact in float, so that step is too).
inline uint16_t double_to_f16_bits(double v) {
  return float_to_f16_bits(static_cast<float>(round_to_f16(v)));
}
inline uint16_t double_to_bf16_bits(double v) {
  return float_to_bf16_bits(static_cast<float>(round_to_bf16(v)));
}

}  // namespace kiln
