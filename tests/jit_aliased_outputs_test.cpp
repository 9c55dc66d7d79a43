// Caller-owned outputs that share memory with an input of the same call (an update in place:
// r = x @ w + r written into r): the call runs into fresh outputs and copies them over, so the
// result is as if the output were separate, and Stats::aliased_output_calls counts it. Kernels
// that write an output before they have read all of an input (a GEMM's K split, x.T @ w run as
// its transpose) gave wrong results here before.
#include <kiln/kiln.h>

#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "needs_llvm.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// r (M x N) = [x.T if transposed_x] @ w + r, into r itself; checked against a double reference.
void check_residual_in_place(int64_t M, int64_t N, int64_t K, bool transposed_x) {
  std::vector<float> x(size_t(M * K)), w(size_t(K * N)), r(size_t(M * N));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 11) - 5) / 8.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 5 % 9) - 4) / 4.0f;
  for (size_t i = 0; i < r.size(); ++i) r[i] = float(int(i % 5)) + 3.0f;
  std::vector<double> want(r.size());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = r[size_t(i * N + j)];
      for (int64_t k = 0; k < K; ++k)
        s += double(transposed_x ? x[size_t(k * M + i)] : x[size_t(i * K + k)]) *
             w[size_t(k * N + j)];
      want[size_t(i * N + j)] = s;
    }
  kiln::Function f = kiln::jit([transposed_x](kiln::Tensor x, kiln::Tensor w, kiln::Tensor r) {
    return kiln::matmul(transposed_x ? x.T() : x, w) + r;
  });
  const std::vector<int64_t> x_shape =
      transposed_x ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
  const std::vector<kiln::Array> in{kiln::Array::view(x.data(), x_shape, kiln::f32),
                                    kiln::Array::view(w.data(), {K, N}, kiln::f32),
                                    kiln::Array::view(r.data(), {M, N}, kiln::f32)};
  std::vector<kiln::Array> out{kiln::Array::view(r.data(), {M, N}, kiln::f32)};
  INFO(M << "x" << N << "x" << K << (transposed_x ? " x.T @ w" : " x @ w"));
  // The first call compiles; the second is a cache hit (its arguments' sizes kept with the
  // variant), from the same starting values.
  const std::vector<float> r0 = r;
  for (int call = 1; call <= 2; ++call) {
    r = r0;
    f.call(in, out);
    double worst = 0;
    for (size_t i = 0; i < r.size(); ++i)
      worst = std::max(worst, std::fabs(double(r[i]) - want[i]) / (1.0 + std::fabs(want[i])));
    CHECK(worst < 1e-5);
    CHECK(f.stats().aliased_output_calls == call);
  }
}

}  // namespace

TEST_CASE("jit: an output that is also the residual input gets the residual's old values",
          "[jit][aliasing]") {
  if (!kiln::x86::available()) {
    WARN("SKIPPED: this CPU runs no kiln x86 kernels; aliased outputs not run");
    return;
  }
  check_residual_in_place(64, 64, 4096, false);  // a K split (direct_k)
  check_residual_in_place(768, 4, 128, true);    // x.T @ w run as its transpose
  check_residual_in_place(33, 33, 33, false);    // one direct kernel
}

TEST_CASE("jit: outputs overlapping an input in part, or only adjacent to it",
          "[jit][aliasing]" KILN_NEEDS_LLVM) {
  // y[i] = 2 * x[i] + 1 over 1000 floats of one buffer: the output starts 10 floats into the
  // input (each element read after an earlier one was written, were it done in place).
  std::vector<float> buf(1010);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i);
  kiln::Function f = kiln::jit([](kiln::Tensor x) { return x * 2.0 + 1.0; });
  const std::vector<kiln::Array> in{kiln::Array::view(buf.data(), {1000}, kiln::f32)};
  std::vector<kiln::Array> out{kiln::Array::view(buf.data() + 10, {1000}, kiln::f32)};
  f.call(in, out);
  for (int i = 0; i < 1000; ++i) CHECK(buf[size_t(10 + i)] == 2.0f * float(i) + 1.0f);
  CHECK(f.stats().aliased_output_calls == 1);
  // Right after the input's last element: no overlap.
  std::vector<float> two(2000, 1.0f);
  const std::vector<kiln::Array> first{kiln::Array::view(two.data(), {1000}, kiln::f32)};
  std::vector<kiln::Array> second{kiln::Array::view(two.data() + 1000, {1000}, kiln::f32)};
  f.call(first, second);
  CHECK(two[1999] == 3.0f);
  CHECK(f.stats().aliased_output_calls == 1);
  // A strided input (every other float of two[1000..1999]) under a contiguous output.
  const std::vector<kiln::Array> strided{
      kiln::Array::view(two.data() + 1000, {500}, kiln::f32, {2})};
  std::vector<kiln::Array> half{kiln::Array::view(two.data() + 1000, {500}, kiln::f32)};
  f.call(strided, half);
  for (int i = 0; i < 500; ++i) CHECK(two[size_t(1000 + i)] == 7.0f);  // 2 * 3 + 1
  CHECK(two[1500] == 3.0f);
  CHECK(f.stats().aliased_output_calls == 2);
  // Again, a cache hit (a strided argument's span is computed on each call): 2 * 7 + 1 where
  // it read 7 (even offsets below 1500), 2 * 3 + 1 past it.
  f.call(strided, half);
  CHECK(two[1000] == 15.0f);
  CHECK(two[1499] == 7.0f);
  CHECK(f.stats().aliased_output_calls == 3);
}
