// Internal to the reference interpreter (interpreter.cpp, interpreter_contract.cpp): how its ops
// compute on a HostTensor's elements, and the ops with a reduction inside them.
#pragma once

#include "ir/host_tensor.h"
#include "ir/node.h"

#include <cstdint>
#include <vector>

namespace kiln::ir::interp {

// Integer arithmetic wraps modulo 2^64 (done on uint64); the result is wrapped to its dtype after
// the op, which for int8 and int32 gives what their own wrapping arithmetic gives.
inline int64_t wrapping_add(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
}
inline int64_t wrapping_sub(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
}
inline int64_t wrapping_mul(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
}
// numpy's integer power (square and multiply, wrapping). numpy refuses a negative exponent (kiln
// does too when it is a constant); a run-time one gives the integer part of the real power: 1 for
// a base of 1, +-1 for -1, 0 for any other base (0 included).
inline int64_t wrapping_pow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  for (; e != 0; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return static_cast<int64_t>(r);
}

// The elements an op reads and writes: exact ints for integer and bool dtypes, else doubles.
inline std::vector<int64_t>& elements(HostTensor& t, int64_t) { return t.ints; }
inline std::vector<double>& elements(HostTensor& t, double) { return t.values; }
inline const std::vector<int64_t>& elements(const HostTensor& t, int64_t) { return t.ints; }
inline const std::vector<double>& elements(const HostTensor& t, double) { return t.values; }

// Calls f(T{}) with T the element type `t` is computed in.
template <typename F>
void with_element_type(const HostTensor& t, F&& f) {
  if (holds_ints(t.dtype))
    f(int64_t{});
  else
    f(double{});
}

// Sums, means, max and min over n's axes.
void eval_reduce(const Node& n, const HostTensor& in, HostTensor& out);
// A [..., M, K] x B [..., K, N].
void eval_matmul(const HostTensor& a, const HostTensor& b, HostTensor& out);
// x [N, C, H, W] (*) w [O, C/groups, KH, KW] -> [N, O, OH, OW].
void eval_conv2d(const Node& node, const HostTensor& x, const HostTensor& w, HostTensor& out);

}  // namespace kiln::ir::interp
