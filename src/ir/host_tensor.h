// HostTensor, the reference interpreter's values, and the element conversions it is built on:
// bytes of every dtype to and from doubles (and, for the integer dtypes, exact int64s), rounding
// and wrapping to a dtype, and the strided walk both the conversions and the interpreter use.
#pragma once

#include <kiln/array.h>
#include <kiln/dtype.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ir {

// A dense row-major host tensor.
//
// `values` holds every element as a double: exact for the float dtypes, and for the integer ones
// as far as 2^53. Integer and bool dtypes also hold their exact elements in `ints` (an int64 past
// 2^53 has no double), and those are what the interpreter computes with. A tensor built with only
// one of the two (tests build integer tensors from `values`) is completed from it when read.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<double> values;
  std::vector<int64_t> ints;

  int64_t numel() const;
  static HostTensor from_array(const Array& a);  // any strides
  // Writes into a contiguous Array of the same dtype and shape (converting each value; integer
  // dtypes from `ints` when they are there).
  void to_array(Array& out) const;
};

// True for the dtypes whose elements are held exactly in HostTensor::ints (integers and bool).
bool holds_ints(DType dtype);

// Rounds a double to what `dtype` can hold (integers truncate toward zero and wrap like C++ two's
// complement, NaN and inf giving 0; bool is != 0; float16/bfloat16/float32 round to nearest even).
double round_to_dtype(double v, DType dtype);
// Wraps an int64 to an integer or bool dtype (int8 and int32 keep their low bits, bool is != 0).
int64_t wrap_to_dtype(int64_t v, DType dtype);
// round_to_dtype for an integer or bool dtype, as the exact int64.
int64_t round_to_int_dtype(double v, DType dtype);

// One element in `dtype`'s storage format read as a double, and written from one (rounded and
// wrapped as round_to_dtype does). With the two integer forms below, the one place element bytes
// are converted.
double decode_element(DType dtype, const void* p);
void encode_element(DType dtype, double v, void* p);
// The same for integer and bool dtypes, exactly.
int64_t decode_int_element(DType dtype, const void* p);
void encode_int_element(DType dtype, int64_t v, void* p);

int64_t element_count(const std::vector<int64_t>& dims);

// Visits, in row-major order over `dims`, the offsets base + sum(idx[i] * strides[i]).
template <typename F>
void for_each_offset(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                     int64_t base, F&& f) {
  const int64_t n = static_cast<int64_t>(dims.size());
  for (int64_t d : dims)
    if (d == 0) return;
  if (n == 0) {
    f(base);
    return;
  }
  std::vector<int64_t> idx(n, 0);
  const int64_t inner = dims[n - 1], inner_stride = strides[n - 1];
  int64_t off = base;
  for (;;) {
    for (int64_t i = 0; i < inner; ++i) f(off + i * inner_stride);
    int64_t d = n - 2;
    for (; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < dims[d]) break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace kiln::ir
