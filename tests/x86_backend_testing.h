// Shared by the x86 backend's JIT-level tests (x86_backend_test.cpp,
// x86_backend_operands_test.cpp): random inputs, double-precision references, and the kernels a
// function compiled on each backend.
#pragma once

#include <kiln/kiln.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kiln::x86::testing {

inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// out [m, n] against x [m, k] @ w (w [k, n], or [n, k] used transposed), relu'd if asked, within
// a tolerance that grows with the sum of |terms|.
inline void check_matmul(const kiln::Array& out, const std::vector<float>& x,
                         const std::vector<float>& w, int64_t m, int64_t k, int64_t n,
                         bool w_transposed, bool relu) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double t = double(x[i * k + q]) * w[w_transposed ? j * k + q : q * n + j];
        acc += t;
        mag += std::abs(t);
      }
      REQUIRE(std::abs(out.data<float>()[i * n + j] - (relu ? std::max(acc, 0.0) : acc)) <=
              1e-5 + 1e-6 * mag);
    }
}

inline double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// Element (i, j) of x @ w (x: m x k, w: k x n, row-major) in double, and the sum of its terms'
// magnitudes (the tolerance grows with it).
struct RefDot {
  double acc = 0, mag = 0;
};
inline RefDot ref_dot(const std::vector<float>& x, const std::vector<float>& w, int64_t i,
                      int64_t j, int64_t k, int64_t n) {
  RefDot r;
  for (int64_t q = 0; q < k; ++q) {
    const double t = double(x[i * k + q]) * w[q * n + j];
    r.acc += t;
    r.mag += std::abs(t);
  }
  return r;
}

// x (m x k), w (k x n) and b (n) as the arguments of a linear layer.
inline std::vector<kiln::Array> linear_args(std::vector<float>& x, std::vector<float>& w,
                                            std::vector<float>& b, int64_t m, int64_t k,
                                            int64_t n) {
  return {kiln::Array::view(x.data(), {m, k}, kiln::f32),
          kiln::Array::view(w.data(), {k, n}, kiln::f32),
          kiln::Array::view(b.data(), {n}, kiln::f32)};
}

inline int64_t kernels_on(const kiln::Function& f, const std::string& backend) {
  auto s = f.stats();
  auto it = s.backend_kernels.find(backend);
  return it == s.backend_kernels.end() ? 0 : it->second;
}

}  // namespace kiln::x86::testing
