// HostTensor and the element conversions of host_tensor.h.
#include "ir/host_tensor.h"

#include "ir/shape.h"

#include <kiln/errors.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/half.h"

namespace kiln::ir {

namespace {

constexpr double kTwoTo63 = 9223372036854775808.0;
constexpr double kTwoTo64 = 18446744073709551616.0;
// Doubles at or above this magnitude round to inf in float32 (the tie between FLT_MAX and 2^128).
constexpr double kF32Overflow = 340282356779733661637539395458142568448.0;  // 2^128 - 2^103

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Truncates toward zero and wraps modulo 2^64 (NaN and inf give 0).
int64_t double_to_wrapped_i64(double v) {
  if (!std::isfinite(v)) return 0;
  const double t = std::trunc(v);
  if (t >= -kTwoTo63 && t < kTwoTo63) return static_cast<int64_t>(t);
  const double m = std::fmod(t, kTwoTo64);  // exact, |m| < 2^64
  uint64_t u = static_cast<uint64_t>(std::fabs(m));
  if (m < 0) u = 0 - u;
  return static_cast<int64_t>(u);  // modular since C++20
}

}  // namespace

int64_t element_count(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

bool holds_ints(DType dtype) { return !is_floating(dtype); }

int64_t wrap_to_dtype(int64_t v, DType dtype) {
  switch (dtype) {
    case DType::i8:
      return static_cast<int8_t>(v);  // modular since C++20
    case DType::i32:
      return static_cast<int32_t>(v);
    case DType::boolean:
      return v != 0 ? 1 : 0;
    default:
      return v;
  }
}

int64_t round_to_int_dtype(double v, DType dtype) {
  if (dtype == DType::boolean) return v != 0 ? 1 : 0;  // NaN too
  return wrap_to_dtype(double_to_wrapped_i64(v), dtype);
}

double round_to_dtype(double v, DType dtype) {
  switch (dtype) {
    case DType::f64:
      return v;
    case DType::f32: {
      if (std::isnan(v)) return v;
      if (std::fabs(v) >= kF32Overflow)
        return std::copysign(std::numeric_limits<double>::infinity(), v);
      return static_cast<double>(static_cast<float>(v));
    }
    case DType::f16:
      return round_to_f16(v);
    case DType::bf16:
      return round_to_bf16(v);
    default:
      return static_cast<double>(round_to_int_dtype(v, dtype));
  }
}

int64_t decode_int_element(DType dtype, const void* ptr) {
  const auto* p = static_cast<const uint8_t*>(ptr);
  switch (dtype) {
    case DType::i8:
      return load<int8_t>(p);
    case DType::i32:
      return load<int32_t>(p);
    case DType::i64:
      return load<int64_t>(p);
    case DType::boolean:
      return *p != 0 ? 1 : 0;
    default:
      throw DTypeError("decode_int_element: expected an integer or bool dtype, got " +
                       std::string(dtype_name(dtype)));
  }
}

void encode_int_element(DType dtype, int64_t v, void* ptr) {
  auto* p = static_cast<uint8_t*>(ptr);
  switch (dtype) {
    case DType::i8:
      return store(p, static_cast<int8_t>(v));
    case DType::i32:
      return store(p, static_cast<int32_t>(v));
    case DType::i64:
      return store(p, v);
    case DType::boolean:
      *p = v != 0 ? 1 : 0;
      return;
    default:
      throw DTypeError("encode_int_element: expected an integer or bool dtype, got " +
                       std::string(dtype_name(dtype)));
  }
}

double decode_element(DType dtype, const void* ptr) {
  const auto* p = static_cast<const uint8_t*>(ptr);
  switch (dtype) {
    case DType::f32:
      return load<float>(p);
    case DType::f64:
      return load<double>(p);
    case DType::f16:
      return f16_bits_to_float(load<uint16_t>(p));
    case DType::bf16:
      return bf16_bits_to_float(load<uint16_t>(p));
    default:
      return static_cast<double>(decode_int_element(dtype, p));
  }
}

void encode_element(DType dtype, double v, void* ptr) {
  auto* p = static_cast<uint8_t*>(ptr);
  switch (dtype) {
    case DType::f32:
      return store(p, static_cast<float>(round_to_dtype(v, DType::f32)));
    case DType::f64:
      return store(p, v);
    case DType::f16:
      return store(p, double_to_f16_bits(v));
    case DType::bf16:
      return store(p, double_to_bf16_bits(v));
    default:
      return encode_int_element(dtype, round_to_int_dtype(v, dtype), p);
  }
}

int64_t HostTensor::numel() const { return element_count(shape); }

HostTensor HostTensor::from_array(const Array& a) {
  HostTensor t;
  t.dtype = a.dtype();
  t.shape = a.shape();
  const DType dt = a.dtype();
  const int64_t esize = static_cast<int64_t>(dtype_size(dt));
  const uint8_t* base = static_cast<const uint8_t*>(a.data());
  // Strides are in elements and may be negative or zero; offsets are relative to data().
  t.values.resize(static_cast<size_t>(t.numel()));
  double* o = t.values.data();
  if (holds_ints(dt)) {
    t.ints.resize(t.values.size());
    int64_t* io = t.ints.data();
    for_each_offset(a.shape(), a.strides(), 0, [&](int64_t off) {
      *io = decode_int_element(dt, base + off * esize);
      *o++ = static_cast<double>(*io++);
    });
  } else {
    for_each_offset(a.shape(), a.strides(), 0,
                    [&](int64_t off) { *o++ = decode_element(dt, base + off * esize); });
  }
  return t;
}

void HostTensor::to_array(Array& out) const {
  if (out.dtype() != dtype)
    throw DTypeError("HostTensor::to_array: expected an array of dtype " +
                     std::string(dtype_name(dtype)) + ", got " +
                     std::string(dtype_name(out.dtype())));
  if (out.shape() != shape)
    throw ShapeError("HostTensor::to_array: expected an array of shape " + dims_text(shape) +
                     ", got " + dims_text(out.shape()));
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  uint8_t* base = static_cast<uint8_t*>(out.data());
  if (holds_ints(dtype) && static_cast<int64_t>(ints.size()) == numel()) {
    const int64_t* v = ints.data();
    for_each_offset(shape, out.strides(), 0,
                    [&](int64_t off) { encode_int_element(dtype, *v++, base + off * esize); });
    return;
  }
  const double* v = values.data();
  for_each_offset(shape, out.strides(), 0,
                  [&](int64_t off) { encode_element(dtype, *v++, base + off * esize); });
}

}  // namespace kiln::ir
