// The x86 backend as the JIT uses it: float32 matmuls with supported epilogues run on it (counted
// in stats()), unsupported epilogues split off into an LLVM kernel while the GEMM stays on x86,
// and results match a double-precision reference for every path.
#include <kiln/kiln.h>

#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"
#include "needs_llvm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// out [m, n] against x [m, k] @ w (w [k, n], or [n, k] used transposed), relu'd if asked, within
// a tolerance that grows with the sum of |terms|.
void check_matmul(const kiln::Array& out, const std::vector<float>& x, const std::vector<float>& w,
                  int64_t m, int64_t k, int64_t n, bool w_transposed, bool relu) {
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

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// Element (i, j) of x @ w (x: m x k, w: k x n, row-major) in double, and the sum of its terms'
// magnitudes (the tolerance grows with it).
struct RefDot {
  double acc = 0, mag = 0;
};
RefDot ref_dot(const std::vector<float>& x, const std::vector<float>& w, int64_t i, int64_t j,
               int64_t k, int64_t n) {
  RefDot r;
  for (int64_t q = 0; q < k; ++q) {
    const double t = double(x[i * k + q]) * w[q * n + j];
    r.acc += t;
    r.mag += std::abs(t);
  }
  return r;
}

// x (m x k), w (k x n) and b (n) as the arguments of a linear layer.
std::vector<kiln::Array> linear_args(std::vector<float>& x, std::vector<float>& w,
                                     std::vector<float>& b, int64_t m, int64_t k, int64_t n) {
  return {kiln::Array::view(x.data(), {m, k}, kiln::f32),
          kiln::Array::view(w.data(), {k, n}, kiln::f32),
          kiln::Array::view(b.data(), {n}, kiln::f32)};
}

int64_t kernels_on(const kiln::Function& f, const std::string& backend) {
  auto s = f.stats();
  auto it = s.backend_kernels.find(backend);
  return it == s.backend_kernels.end() ? 0 : it->second;
}

// gelu(x @ w * 0.5 + b) + r through the JIT: one x86 kernel, no LLVM kernel, no fallback, and
// the double-precision reference within a tolerance that grows with the sum of |terms|.
void check_linear_gelu_residual(int64_t m, int64_t k, int64_t n) {
  auto x = random_values(m * k, 1), w = random_values(k * n, 2), b = random_values(n, 3),
       r = random_values(m * n, 4);
  kiln::Function f = kiln::jit([](kiln::Tensor x, kiln::Tensor w, kiln::Tensor b, kiln::Tensor r) {
    return kiln::gelu(kiln::matmul(x, w) * 0.5 + b) + r;
  });
  std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {m, k}, kiln::f32),
                                   kiln::Array::view(w.data(), {k, n}, kiln::f32),
                                   kiln::Array::view(b.data(), {n}, kiln::f32),
                                   kiln::Array::view(r.data(), {m, n}, kiln::f32)};
  auto out = f(args);
  REQUIRE(kernels_on(f, "x86") == 1);
  REQUIRE(kernels_on(f, "llvm") == 0);
  REQUIRE(f.stats().fallbacks == 0);
  const float* y = out[0].data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const auto [acc, mag] = ref_dot(x, w, i, j, k, n);
      double want = gelu(0.5 * acc + b[j]) + r[i * n + j];
      INFO(m << "x" << n << "x" << k << " at " << i << ", " << j);
      REQUIRE(std::abs(y[i * n + j] - want) <= 1e-5 + 1e-5 * std::abs(want) + 1e-6 * mag);
    }
  auto ins = f.inspect(args);
  REQUIRE(ins.kernels.size() == 1);
  REQUIRE(ins.kernels[0].backend == "x86");
  REQUIRE(ins.kernels[0].asm_text.find("vfmadd231ps") != std::string::npos);
}

}  // namespace

TEST_CASE("linear + bias + gelu + residual runs as one x86 kernel", "[x86][backend]") {
  check_linear_gelu_residual(37, 64, 48);
  // Long K: partial sums added before the epilogue (on AVX2 the first is direct_k; on a pool of
  // two threads and a 512 KiB L2 the second is the packed path's K split).
  check_linear_gelu_residual(40, 3000, 24);
  check_linear_gelu_residual(128, 4096, 96);
}

TEST_CASE("an epilogue the GEMM cannot fuse is split off, the matmul stays on x86",
          "[x86][backend]" KILN_NEEDS_LLVM) {
  const int64_t m = 9, k = 16, n = 20;
  auto x = random_values(m * k, 5), w = random_values(k * n, 6);
  kiln::Function f = kiln::jit([](kiln::Tensor x, kiln::Tensor w) {
    return kiln::tanh(kiln::matmul(x, w)) * 3.0;  // tanh is not an x86 epilogue
  });
  auto out = f({kiln::Array::view(x.data(), {m, k}, kiln::f32),
                kiln::Array::view(w.data(), {k, n}, kiln::f32)});
  REQUIRE(kernels_on(f, "x86") == 1);
  REQUIRE(kernels_on(f, "llvm") == 1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += double(x[i * k + q]) * w[q * n + j];
      REQUIRE(std::abs(out[0].data<float>()[i * n + j] - std::tanh(acc) * 3.0) <= 2e-5);
    }
  // The epilogue not applied in registers is a fallback: counted, with its reason.
  const kiln::Stats st = f.stats();
  REQUIRE(st.fallbacks == 1);
  REQUIRE(st.fallback_reasons.size() == 1);
  CHECK_THAT(st.fallback_reasons[0], Catch::Matchers::Contains("without its epilogue") &&
                                         Catch::Matchers::Contains("tanh"));
}

TEST_CASE("a split epilogue is one fallback however many groups compiled before it",
          "[x86][backend]" KILN_NEEDS_LLVM) {
  // Group 0 (a fused linear layer) is compiled again when group 1's epilogue is split off and the
  // fusion restarts: its reasons are not counted twice, and finding it in the memory cache then is
  // not a memory hit (this process compiled it a moment before); a fused epilogue counts none.
  const int64_t m = 7, k = 12, n = 12;
  auto x = random_values(m * k, 7), w = random_values(k * n, 8), b = random_values(n, 9);
  std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {m, k}, kiln::f32),
                                   kiln::Array::view(w.data(), {k, n}, kiln::f32),
                                   kiln::Array::view(b.data(), {n}, kiln::f32)};
  kiln::Function f = kiln::jit([](kiln::Tensor x, kiln::Tensor w, kiln::Tensor b) {
    kiln::Tensor h = kiln::relu(kiln::matmul(x, w) + b);
    return kiln::sigmoid(kiln::matmul(h, w));
  });
  (void)f(args);
  CHECK(kernels_on(f, "x86") == 2);
  CHECK(f.stats().fallbacks == 1);
  CHECK(f.stats().fallback_reasons.size() == 1);
  CHECK(f.stats().kernel_memory_hits == 0);
}

TEST_CASE("a weight view or bias two matmuls share is read in place by both, not copied",
          "[x86][backend]") {
  // x @ w.T and z @ w.T read w through the transpose (no transposed copy of w); one bias b in
  // two layers stays each one's fused bias (not an M x N broadcast stored for both). No LLVM
  // kernel: this runs in a build without LLVM too.
  const int64_t m = 7, k = 12, n = 12, mz = 5;
  auto x = random_values(m * k, 10), w = random_values(k * n, 11), b = random_values(n, 12),
       z = random_values(mz * k, 13);
  const auto X = kiln::Array::view(x.data(), {m, k}, kiln::f32),
             W = kiln::Array::view(w.data(), {n, k}, kiln::f32),
             B = kiln::Array::view(b.data(), {n}, kiln::f32),
             Z = kiln::Array::view(z.data(), {mz, k}, kiln::f32);
  kiln::Function f = kiln::jit([](kiln::Tensor x, kiln::Tensor z, kiln::Tensor w) {
    kiln::Tensor wt = w.transpose();
    return std::vector<kiln::Tensor>{kiln::matmul(x, wt), kiln::matmul(z, wt)};
  });
  auto out = f({X, Z, W});
  CHECK(kernels_on(f, "x86") == 2);
  CHECK(kernels_on(f, "llvm") == 0);
  CHECK(f.stats().fallbacks == 0);
  for (int which = 0; which < 2; ++which) {
    const std::vector<float>& a = which ? z : x;
    const int64_t rows = which ? mz : m;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += double(a[i * k + q]) * w[j * k + q];
        REQUIRE(std::abs(out[which].data<float>()[i * n + j] - acc) <= 1e-5 + 1e-6 * std::abs(acc));
      }
  }
  kiln::Function g = kiln::jit([](kiln::Tensor x, kiln::Tensor w, kiln::Tensor b) {
    return kiln::relu(kiln::matmul(kiln::relu(kiln::matmul(x, w) + b), w) + b);
  });
  auto y = g({X, kiln::Array::view(w.data(), {k, n}, kiln::f32), B});
  CHECK(kernels_on(g, "x86") == 2);
  CHECK(kernels_on(g, "llvm") == 0);
  CHECK(g.stats().fallbacks == 0);
  std::vector<double> h(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b[j];
      for (int64_t q = 0; q < k; ++q) acc += double(x[i * k + q]) * w[q * n + j];
      h[i * n + j] = std::max(acc, 0.0);
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b[j], mag = std::abs(b[j]);
      for (int64_t q = 0; q < n; ++q) {
        acc += h[i * n + q] * w[q * n + j];
        mag += std::abs(h[i * n + q] * w[q * n + j]);
      }
      REQUIRE(std::abs(y[0].data<float>()[i * n + j] - std::max(acc, 0.0)) <= 1e-5 + 4e-6 * mag);
    }
}

TEST_CASE("a subtracted bias and scalar terms are the fused bias", "[x86][backend]") {
  // x @ w - b, relu(x @ w + 1.5), gelu(x @ w * 2 - b + 0.25), 0.5 + b + x @ w, x @ w - 1,
  // b - x @ w: one x86 kernel each (in a build without LLVM too), no fallback; the bias made per
  // call.
  const int64_t m = 11, k = 19, n = 37;
  auto x = random_values(m * k, 17), w = random_values(k * n, 18), b = random_values(n, 19);
  const std::vector<kiln::Array> args = linear_args(x, w, b, m, k, n);
  using T = kiln::Tensor;
  struct Case {
    const char* name;
    std::function<T(T, T, T)> fn;
    std::function<double(double, double)> ref;  // of (x @ w, b)
  };
  const std::vector<Case> cases = {
      {"x @ w - b", [](T x, T w, T b) { return kiln::matmul(x, w) - b; },
       [](double y, double bj) { return y - bj; }},
      {"relu(x @ w + 1.5)", [](T x, T w, T) { return kiln::relu(kiln::matmul(x, w) + 1.5); },
       [](double y, double) { return std::max(y + 1.5, 0.0); }},
      {"gelu(x @ w * 2 - b + 0.25)",
       [](T x, T w, T b) { return kiln::gelu(kiln::matmul(x, w) * 2.0 - b + 0.25); },
       [](double y, double bj) { return gelu(2 * y - bj + 0.25); }},
      {"0.5 + b + x @ w", [](T x, T w, T b) { return 0.5 + (b + kiln::matmul(x, w)); },
       [](double y, double bj) { return y + bj + 0.5; }},
      {"x @ w - 1", [](T x, T w, T) { return kiln::matmul(x, w) - 1.0; },
       [](double y, double) { return y - 1; }},
      // A scale after the activation: relu with a positive scale, or none.
      {"relu(x @ w + b) * 2",
       [](T x, T w, T b) { return kiln::relu(kiln::matmul(x, w) + b) * 2.0; },
       [](double y, double bj) { return 2 * std::max(y + bj, 0.0); }},
      {"(x @ w * 3 + b - 0.5) / 4",
       [](T x, T w, T b) { return (kiln::matmul(x, w) * 3.0 + b - 0.5) / 4.0; },
       [](double y, double bj) { return (3 * y + bj - 0.5) / 4; }},
      {"0.5 * relu(x @ w + 1)",
       [](T x, T w, T) { return 0.5 * kiln::relu(kiln::matmul(x, w) + 1.0); },
       [](double y, double) { return 0.5 * std::max(y + 1, 0.0); }},
      // Terms left of a subtraction: the rest is negated.
      {"b - x @ w", [](T x, T w, T b) { return b - kiln::matmul(x, w); },
       [](double y, double bj) { return bj - y; }},
      {"relu(0.5 - x @ w * 2 + b)",
       [](T x, T w, T b) { return kiln::relu(0.5 - kiln::matmul(x, w) * 2.0 + b); },
       [](double y, double bj) { return std::max(0.5 - 2 * y + bj, 0.0); }},
      {"b - (x @ w - 1)", [](T x, T w, T b) { return b - (kiln::matmul(x, w) - 1.0); },
       [](double y, double bj) { return bj - y + 1; }},
      {"silu(-(x @ w) + b)", [](T x, T w, T b) { return kiln::silu(-kiln::matmul(x, w) + b); },
       [](double y, double bj) { return (bj - y) / (1 + std::exp(y - bj)); }},
      {"(1 - x @ w) / 4", [](T x, T w, T) { return (1.0 - kiln::matmul(x, w)) / 4.0; },
       [](double y, double) { return (1 - y) / 4; }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    kiln::Function f = kiln::jit([fn = c.fn](T x, T w, T b) { return fn(x, w, b); });
    for (int call = 0; call < 2; ++call) {  // the per-call bias is made again each call
      auto out = f(args);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const auto [acc, mag] = ref_dot(x, w, i, j, k, n);
          REQUIRE(std::abs(out[0].data<float>()[i * n + j] - c.ref(acc, b[j])) <=
                  1e-5 + 8e-6 * (mag + 2));
        }
    }
    CHECK(kernels_on(f, "x86") == 1);
    CHECK(kernels_on(f, "llvm") == 0);
    CHECK(f.stats().fallbacks == 0);
  }
}

TEST_CASE("a scale after an activation it does not commute with is split off, and counted",
          "[x86][backend]" KILN_NEEDS_LLVM) {
  const int64_t m = 6, k = 10, n = 9;
  auto x = random_values(m * k, 20), w = random_values(k * n, 21), b = random_values(n, 22);
  const std::vector<kiln::Array> args = linear_args(x, w, b, m, k, n);
  using T = kiln::Tensor;
  kiln::Function neg =
      kiln::jit([](T x, T w, T b) { return kiln::relu(kiln::matmul(x, w) + b) * -2.0; });
  kiln::Function gel =
      kiln::jit([](T x, T w, T b) { return kiln::gelu(kiln::matmul(x, w) + b) * 2.0; });
  // A column scale after an activation, then a scalar (b as the column scale).
  kiln::Function col =
      kiln::jit([](T x, T w, T b) { return b * kiln::relu(kiln::matmul(x, w)) * 2.0; });
  auto yn = neg(args), yg = gel(args), yc = col(args);
  for (const kiln::Function* f : {&neg, &gel, &col}) {
    CHECK(kernels_on(*f, "x86") == 1);
    CHECK(kernels_on(*f, "llvm") == 1);
    CHECK(f->stats().fallbacks == 1);
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const auto [acc, mag] = ref_dot(x, w, i, j, k, n);
      REQUIRE(std::abs(yn[0].data<float>()[i * n + j] - -2 * std::max(acc + b[j], 0.0)) <=
              1e-5 + 8e-6 * (mag + 2));
      REQUIRE(std::abs(yg[0].data<float>()[i * n + j] - 2 * gelu(acc + b[j])) <=
              1e-5 + 8e-6 * (mag + 2));
      REQUIRE(std::abs(yc[0].data<float>()[i * n + j] - 2 * b[j] * std::max(acc, 0.0)) <=
              1e-5 + 8e-6 * (mag + 2));
    }
}

TEST_CASE("a column scale fuses: before the activation, or after the bias (LayerScale)",
          "[x86][backend]") {
  // x @ w * g, relu(x @ w * g + b), r + g * (x @ w + b), g * (x @ w - 1) / 2, with g an input or a
  // constant: one x86 kernel, no LLVM kernel, no fallback (in a build without LLVM too); and
  // g * relu(x @ w + b), g the epilogue's last factor: one residual row for every row of C.
  using T = kiln::Tensor;
  for (auto [m, k, n] :
       {std::array<int64_t, 3>{11, 19, 37}, {1, 64, 200}, {300, 40, 3}, {64, 64, 64}, {1, 1, 1}}) {
    auto x = random_values(m * k, 50), w = random_values(k * n, 51), b = random_values(n, 52),
         g = random_values(n, 53), r = random_values(m * n, 54);
    const std::vector<float> gc = g;
    const std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {m, k}, kiln::f32),
                                           kiln::Array::view(w.data(), {k, n}, kiln::f32),
                                           kiln::Array::view(b.data(), {n}, kiln::f32),
                                           kiln::Array::view(g.data(), {n}, kiln::f32),
                                           kiln::Array::view(r.data(), {m, n}, kiln::f32)};
    struct Case {
      const char* name;
      std::function<T(T, T, T, T, T)> fn;
      std::function<double(double, double, double, double)> ref;  // of (x @ w, b, g, r)
    };
    const std::vector<Case> cases = {
        {"x @ w * g", [](T x, T w, T, T g, T) { return kiln::matmul(x, w) * g; },
         [](double y, double, double gj, double) { return y * gj; }},
        {"relu(x @ w * g + b)",
         [](T x, T w, T b, T g, T) { return kiln::relu(kiln::matmul(x, w) * g + b); },
         [](double y, double bj, double gj, double) { return std::max(y * gj + bj, 0.0); }},
        {"r + g * (x @ w + b)",
         [](T x, T w, T b, T g, T r) { return r + g * (kiln::matmul(x, w) + b); },
         [](double y, double bj, double gj, double ri) { return ri + gj * (y + bj); }},
        {"g * relu(x @ w + b)",
         [](T x, T w, T b, T g, T) { return g * kiln::relu(kiln::matmul(x, w) + b); },
         [](double y, double bj, double gj, double) { return gj * std::max(y + bj, 0.0); }},
        {"g * (x @ w - 1) / 2",
         [](T x, T w, T, T g, T) { return g * (kiln::matmul(x, w) - 1.0) / 2.0; },
         [](double y, double, double gj, double) { return gj * (y - 1) / 2; }},
        {"gc * (x @ w + b), gc a constant",
         [&gc, n](T x, T w, T b, T, T) {
           return kiln::constant(gc.data(), {n}, kiln::f32) * (kiln::matmul(x, w) + b);
         },
         [](double y, double bj, double gj, double) { return gj * (y + bj); }},
    };
    for (const Case& c : cases) {
      INFO(c.name << " at " << m << "x" << k << "x" << n);
      kiln::Function f =
          kiln::jit([fn = c.fn](T x, T w, T b, T g, T r) { return fn(x, w, b, g, r); });
      for (int call = 0; call < 2; ++call) {
        auto out = f(args);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const auto [acc, mag] = ref_dot(x, w, i, j, k, n);
            const double want = c.ref(acc, b[j], g[j], r[i * n + j]);
            REQUIRE(std::abs(out[0].data<float>()[i * n + j] - want) <=
                    1e-5 + 1e-5 * std::abs(want) + 8e-6 * (mag + 2));
          }
      }
      CHECK(kernels_on(f, "x86") == 1);
      CHECK(kernels_on(f, "llvm") == 0);
      CHECK(f.stats().fallbacks == 0);
    }
  }
}

TEST_CASE("a 1-d operand's matmul is one x86 kernel storing straight into the output",
          "[x86][backend]") {
  // v @ W and W @ v (a GEMV written with a vector): the traced reshape of the [1, N] or [M, 1]
  // result to a vector is not a copy kernel of its own (none needs LLVM either).
  const int64_t m = 37, k = 53;
  auto w = random_values(m * k, 14), v = random_values(k, 15), u = random_values(m, 16);
  const auto W = kiln::Array::view(w.data(), {m, k}, kiln::f32);
  kiln::Function gemv =
      kiln::jit([](kiln::Tensor w, kiln::Tensor v) { return kiln::matmul(w, v); });
  kiln::Function vecmat =
      kiln::jit([](kiln::Tensor u, kiln::Tensor w) { return kiln::matmul(u, w); });
  // The same output twice: the second is a copy of the first.
  kiln::Function twice = kiln::jit([](kiln::Tensor w, kiln::Tensor v) {
    kiln::Tensor y = kiln::matmul(w, v);
    return std::vector<kiln::Tensor>{y, y};
  });
  auto y = gemv({W, kiln::Array::view(v.data(), {k}, kiln::f32)});
  auto z = vecmat({kiln::Array::view(u.data(), {m}, kiln::f32), W});
  auto yy = twice({W, kiln::Array::view(v.data(), {k}, kiln::f32)});
  REQUIRE(y[0].shape() == std::vector<int64_t>{m});
  REQUIRE(z[0].shape() == std::vector<int64_t>{k});
  for (const kiln::Function* f : {&gemv, &vecmat, &twice}) {
    CHECK(kernels_on(*f, "x86") == 1);
    CHECK(kernels_on(*f, "llvm") == 0);
  }
  for (int64_t i = 0; i < m; ++i) {
    double acc = 0, mag = 0;
    for (int64_t q = 0; q < k; ++q) {
      acc += double(w[i * k + q]) * v[q];
      mag += std::abs(double(w[i * k + q]) * v[q]);
    }
    REQUIRE(std::abs(y[0].data<float>()[i] - acc) <= 1e-5 + 2e-6 * mag);
    REQUIRE(yy[0].data<float>()[i] == y[0].data<float>()[i]);
    REQUIRE(yy[1].data<float>()[i] == y[0].data<float>()[i]);
  }
  for (int64_t j = 0; j < k; ++j) {
    double acc = 0, mag = 0;
    for (int64_t i = 0; i < m; ++i) {
      acc += double(u[i]) * w[i * k + j];
      mag += std::abs(double(u[i]) * w[i * k + j]);
    }
    REQUIRE(std::abs(z[0].data<float>()[j] - acc) <= 1e-5 + 2e-6 * mag);
  }
}

TEST_CASE("a 1-d operand's matmul takes its epilogue: one x86 kernel", "[x86][backend]") {
  // W @ v + b, relu(W @ v + b) + r, gelu(v @ W + b), W @ v - 1 with a batched W, and a constant
  // bias: the traced reshape to a vector sinks below the epilogue (and W @ v runs as v^T @ W^T,
  // so the bias is along the GEMM's columns): one x86 kernel, no LLVM kernel, no fallback.
  using T = kiln::Tensor;
  for (auto [m, k] : {std::pair<int64_t, int64_t>{37, 53}, {1, 1}, {1, 9}, {17, 1}, {64, 128}}) {
    const int64_t nb = 3;
    auto w = random_values(nb * m * k, 30), v = random_values(k, 31), b = random_values(m, 32),
         r = random_values(m, 33), u = random_values(m, 34), bk = random_values(k, 35);
    const auto W = kiln::Array::view(w.data(), {m, k}, kiln::f32);
    const auto Wb = kiln::Array::view(w.data(), {nb, m, k}, kiln::f32);
    const auto V = kiln::Array::view(v.data(), {k}, kiln::f32);
    const auto U = kiln::Array::view(u.data(), {m}, kiln::f32);
    const auto B = kiln::Array::view(b.data(), {m}, kiln::f32);
    const auto R = kiln::Array::view(r.data(), {m}, kiln::f32);
    auto wv = [&](int64_t bi, int64_t i) {  // (W @ v)[bi, i] and its terms' magnitude
      RefDot d;
      for (int64_t q = 0; q < k; ++q) {
        const double t = double(w[(bi * m + i) * k + q]) * v[q];
        d.acc += t;
        d.mag += std::abs(t);
      }
      return d;
    };
    auto uw = [&](int64_t j) {  // (u @ W)[j] with W [m, k]
      RefDot d;
      for (int64_t i = 0; i < m; ++i) {
        const double t = double(u[i]) * w[i * k + j];
        d.acc += t;
        d.mag += std::abs(t);
      }
      return d;
    };
    struct Case {
      const char* name;
      kiln::Function f;
      std::vector<kiln::Array> args;
      std::vector<int64_t> shape;
      std::function<std::pair<double, double>(int64_t)> ref;  // element e: value, magnitude
    };
    const std::vector<float> cb = b;
    std::vector<Case> cases;
    cases.push_back({"W @ v + b",
                     kiln::jit([](T w, T v, T b) { return kiln::matmul(w, v) + b; }),
                     {W, V, B},
                     {m},
                     [&](int64_t i) {
                       auto d = wv(0, i);
                       return std::pair{d.acc + b[i], d.mag};
                     }});
    cases.push_back(
        {"relu(W @ v + b) + r",
         kiln::jit([](T w, T v, T b, T r) { return kiln::relu(kiln::matmul(w, v) + b) + r; }),
         {W, V, B, R},
         {m},
         [&](int64_t i) {
           auto d = wv(0, i);
           return std::pair{std::max(d.acc + b[i], 0.0) + r[i], d.mag};
         }});
    cases.push_back({"gelu(u @ W + b)",
                     kiln::jit([](T u, T w, T b) { return kiln::gelu(kiln::matmul(u, w) + b); }),
                     {U, W, kiln::Array::view(bk.data(), {k}, kiln::f32)},
                     {k},
                     [&](int64_t j) {
                       auto d = uw(j);
                       return std::pair{gelu(d.acc + bk[j]), d.mag};
                     }});
    cases.push_back({"batched W @ v - 1",
                     kiln::jit([](T w, T v) { return kiln::matmul(w, v) - 1.0; }),
                     {Wb, V},
                     {nb, m},
                     [&](int64_t e) {
                       auto d = wv(e / m, e % m);
                       return std::pair{d.acc - 1, d.mag};
                     }});
    cases.push_back({"W @ v + a constant b",
                     kiln::jit([&cb, m](T w, T v) {
                       return kiln::matmul(w, v) + kiln::constant(cb.data(), {m}, kiln::f32);
                     }),
                     {W, V},
                     {m},
                     [&](int64_t i) {
                       auto d = wv(0, i);
                       return std::pair{d.acc + b[i], d.mag};
                     }});
    for (Case& c : cases) {
      INFO(c.name << " at m=" << m << ", k=" << k);
      auto out = c.f(c.args);
      REQUIRE(out[0].shape() == c.shape);
      for (int64_t e = 0; e < out[0].numel(); ++e) {
        const auto [want, mag] = c.ref(e);
        REQUIRE(std::abs(out[0].data<float>()[e] - want) <=
                1e-5 + 1e-5 * std::abs(want) + 2e-6 * mag);
      }
      CHECK(kernels_on(c.f, "x86") == 1);
      CHECK(kernels_on(c.f, "llvm") == 0);
      CHECK(c.f.stats().fallbacks == 0);
    }
  }
}

TEST_CASE("a gated linear unit is two x86 kernels: the second multiplies by the first's output",
          "[x86][backend]") {
  // silu(x @ w1) * (x @ w3) (SwiGLU), gelu(x @ w1 + b) * (x @ w3), (x @ w1) * (x @ w3) and a
  // batched one: one product is stored, the other multiplies it in its epilogue (a gate); no
  // LLVM kernel, no fallback (in a build without LLVM too).
  using T = kiln::Tensor;
  struct Case {
    const char* name;
    std::function<T(T, T, T, T)> fn;
    std::function<double(double, double, double)> ref;  // of (x @ w1, x @ w3, b)
  };
  const std::vector<Case> cases = {
      {"silu(x @ w1) * (x @ w3)",
       [](T x, T w1, T w3, T) { return kiln::silu(kiln::matmul(x, w1)) * kiln::matmul(x, w3); },
       [](double g, double u, double) { return g / (1 + std::exp(-g)) * u; }},
      {"gelu(x @ w1 + b) * (x @ w3)",
       [](T x, T w1, T w3, T b) {
         return kiln::gelu(kiln::matmul(x, w1) + b) * kiln::matmul(x, w3);
       },
       [](double g, double u, double bj) { return gelu(g + bj) * u; }},
      {"(x @ w3) * relu(x @ w1 * 2)",
       [](T x, T w1, T w3, T) {
         return kiln::matmul(x, w3) * kiln::relu(kiln::matmul(x, w1) * 2.0);
       },
       [](double g, double u, double) { return u * std::max(2 * g, 0.0); }},
  };
  for (auto [bt, m, k, n] : {std::array<int64_t, 4>{1, 13, 29, 45},
                             {1, 1, 64, 100},
                             {1, 64, 96, 130},
                             {3, 5, 17, 19},
                             {1, 1, 1, 1}}) {
    auto x = random_values(bt * m * k, 40), w1 = random_values(k * n, 41),
         w3 = random_values(k * n, 42), b = random_values(n, 43);
    std::vector<int64_t> xs = bt > 1 ? std::vector<int64_t>{bt, m, k} : std::vector<int64_t>{m, k};
    const std::vector<kiln::Array> args = {kiln::Array::view(x.data(), xs, kiln::f32),
                                           kiln::Array::view(w1.data(), {k, n}, kiln::f32),
                                           kiln::Array::view(w3.data(), {k, n}, kiln::f32),
                                           kiln::Array::view(b.data(), {n}, kiln::f32)};
    for (const Case& c : cases) {
      INFO(c.name << " at " << bt << "x" << m << "x" << k << "x" << n);
      kiln::Function f = kiln::jit([fn = c.fn](T x, T w1, T w3, T b) { return fn(x, w1, w3, b); });
      auto out = f(args);
      for (int64_t i = 0; i < bt * m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const auto g = ref_dot(x, w1, i, j, k, n), u = ref_dot(x, w3, i, j, k, n);
          const double want = c.ref(g.acc, u.acc, b[j]);
          REQUIRE(std::abs(out[0].data<float>()[i * n + j] - want) <=
                  1e-5 + 1e-5 * std::abs(want) + 4e-6 * (g.mag + 1) * (u.mag + 1));
        }
      CHECK(kernels_on(f, "x86") == 2);
      CHECK(kernels_on(f, "llvm") == 0);
      CHECK(f.stats().fallbacks == 0);
    }
  }
}

TEST_CASE("transposed, strided and batched operands are read in place", "[x86][backend]") {
  const int64_t batch = 3, m = 5, k = 7, n = 6;
  auto a = random_values(batch * k * m, 7), w = random_values(n * k, 8);
  // a is stored [batch, k, m] and used transposed; w is stored [n, k] and used as w.T.
  kiln::Function f = kiln::jit([](kiln::Tensor a, kiln::Tensor w) {
    return kiln::matmul(kiln::transpose(a, {0, 2, 1}), w.T());
  });
  auto out = f({kiln::Array::view(a.data(), {batch, k, m}, kiln::f32),
                kiln::Array::view(w.data(), {n, k}, kiln::f32)});
  REQUIRE(kernels_on(f, "x86") == 1);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += double(a[(bi * k + q) * m + i]) * w[j * k + q];
        REQUIRE(std::abs(out[0].data<float>()[(bi * m + i) * n + j] - acc) <= 1e-5);
      }
}

TEST_CASE("x @ w.T (a linear layer's weight layout) reads w in place on the dot path",
          "[x86][backend][dot]") {
  // w stored [n, k], an argument: up to 8 rows, the dot kernels read it in place (no copy, no
  // packing). As a constant, w.T is folded at compile time into a row-major constant (then read
  // in place or packed once as any constant weight): results only.
  struct Case {
    int64_t m, k, n;
    bool constant;
  };
  for (const Case& c :
       {Case{1, 300, 200, false}, Case{4, 300, 200, false}, Case{8, 96, 1001, false},
        Case{1, 300, 200, true}, Case{4, 300, 128, true}}) {
    auto x = random_values(c.m * c.k, 21), w = random_values(c.n * c.k, 22);
    const int64_t k = c.k, n = c.n;
    kiln::Function f =
        c.constant
            ? kiln::jit([&](kiln::Tensor x) {
                return kiln::matmul(x, kiln::constant(w.data(), {n, k}, kiln::f32).T());
              })
            : kiln::jit([](kiln::Tensor x, kiln::Tensor w) { return kiln::matmul(x, w.T()); });
    std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {c.m, c.k}, kiln::f32)};
    if (!c.constant) args.push_back(kiln::Array::view(w.data(), {c.n, c.k}, kiln::f32));
    const kiln::x86::GemmStats before = kiln::x86::stats();
    auto out = f(args);
    const kiln::x86::GemmStats after = kiln::x86::stats();
    INFO("m " << c.m << " k " << c.k << " n " << c.n << " constant " << c.constant);
    REQUIRE(kernels_on(f, "x86") == 1);
    if (!c.constant) {
      CHECK(after.dot_calls == before.dot_calls + 1);
      CHECK(f.inspect(args).kernels.at(0).asm_text.find("; dot_") != std::string::npos);
    }
    check_matmul(out[0], x, w, c.m, c.k, c.n, true, false);
  }
}

TEST_CASE("x @ w with every dim symbolic runs each call's extents on their exact plan",
          "[x86][backend]") {
  // gemm_entry.cpp (make_plan): after a second shape every dim of x @ w is symbolic; each call's
  // extents then get the plan of an exact problem (direct kernels for these), not the bounded
  // packed one (which packed A and B on every call: 64^3 ~2x slower).
  kiln::Function f = kiln::jit([](kiln::Tensor x, kiln::Tensor w) { return kiln::matmul(x, w); });
  const int64_t dims[] = {24, 48, 40, 48};
  for (int call = 0; call < 4; ++call) {
    const int64_t m = dims[call], k = m + 1, n = m + 2;
    auto x = random_values(m * k, uint32_t(30 + call)),
         w = random_values(k * n, uint32_t(40 + call));
    std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {m, k}, kiln::f32),
                                     kiln::Array::view(w.data(), {k, n}, kiln::f32)};
    const kiln::x86::GemmStats before = kiln::x86::stats();
    auto out = f(args);
    const kiln::x86::GemmStats after = kiln::x86::stats();
    INFO("call " << call << ": " << m << "x" << n << "x" << k);
    check_matmul(out[0], x, w, m, k, n, false, false);
    CHECK(after.direct_calls == before.direct_calls + 1);
    CHECK(after.packed_calls == before.packed_calls);
    CHECK(after.symbolic_bounded_plans == before.symbolic_bounded_plans);
    // Symbolic from the second call on (one variant for all of them); the last call's extents
    // repeat the second's, whose plan is memoized.
    CHECK(f.stats().variants == (call == 0 ? 1 : 2));
    CHECK(after.symbolic_exact_plans - before.symbolic_exact_plans == (call == 1 || call == 2));
  }
}

TEST_CASE("a constant weight is packed once where that pays, different weights share no kernel",
          "[x86][backend]") {
  // m, k, n = 4, 8, 12: the direct kernel reads the weight in place (packed once, the packed path
  // ran it at half the speed); 4, 1024, 2048: packed once (the packed path would pack it on every
  // call, its rows a page apart for the GEMV-like paths).
  struct Case {
    int64_t m, k, n;
    const char* kernels;  // the listing's kernel kind
  };
  for (const Case& c : {Case{4, 8, 12, "; direct_"}, Case{4, 1024, 2048, "; packed_"}}) {
    auto x = random_values(c.m * c.k, 9);
    for (uint32_t seed : {10u, 11u}) {
      auto w = random_values(c.k * c.n, seed);
      const int64_t k = c.k, n = c.n;
      kiln::Function f = kiln::jit([&](kiln::Tensor x) {
        return kiln::relu(kiln::matmul(x, kiln::constant(w.data(), {k, n}, kiln::f32)));
      });
      std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {c.m, c.k}, kiln::f32)};
      auto out = f(args);
      REQUIRE(kernels_on(f, "x86") == 1);
      INFO("m " << c.m << " k " << c.k << " n " << c.n << " seed " << seed);
      check_matmul(out[0], x, w, c.m, c.k, c.n, false, true);
      const std::string listing = f.inspect(args).kernels.at(0).asm_text;
      CHECK(listing.find(c.kernels) != std::string::npos);
    }
  }
}

TEST_CASE("with a batch of any size, a small constant weight is read in place, a large one packed",
          "[x86][backend]") {
  // x86_backend.cpp: with M symbolic (dynamic="auto" after a second batch size), the plan at the
  // listing's extent decides. A weight within the direct kernels' share of L2 is read in place
  // by their blocks (gemm_driver.cpp, plan_direct_blocks); packed once, every call took the
  // packed path, which packs A (100000x3 @ a constant 3x3: 114 against 59 us a call). A large
  // one is still packed once.
  struct Case {
    int64_t k, n;
    bool packed;
  };
  for (const Case& c : {Case{3, 3, false}, Case{64, 48, false}, Case{1024, 1024, true}}) {
    auto w = random_values(c.k * c.n, 12);
    const int64_t k = c.k, n = c.n;
    kiln::Function f = kiln::jit([&](kiln::Tensor x) {
      return kiln::matmul(x, kiln::constant(w.data(), {n, k}, kiln::f32).T());
    });
    for (int64_t m : {300, 301, 1000, 5}) {
      auto x = random_values(m * c.k, uint32_t(13 + m));
      std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {m, c.k}, kiln::f32)};
      const kiln::x86::GemmStats before = kiln::x86::stats();
      auto out = f(args);
      const kiln::x86::GemmStats after = kiln::x86::stats();
      INFO("m " << m << " k " << c.k << " n " << c.n);
      REQUIRE(kernels_on(f, "x86") == f.stats().variants);  // one x86 kernel per variant
      check_matmul(out[0], x, w, m, c.k, c.n, true, false);
      if (m == 1000) {                   // M symbolic by now
        CHECK(f.stats().variants == 2);  // 300 exact, then one for every M from 301 on
        CHECK(after.prepacked_calls - before.prepacked_calls == (c.packed ? 1 : 0));
        if (!c.packed) CHECK(after.direct_calls - before.direct_calls == 1);
      }
    }
  }
}

TEST_CASE("a constant weight read in place on one pool size is packed once on another",
          "[x86][backend]") {
  namespace x86 = kiln::x86;
  if (!x86::available()) {
    std::printf("SKIPPED: this CPU has neither AVX-512 nor AVX2+FMA; x86 backend test not run\n");
    return;
  }
  // 128x4096 @ 4096x200: on 2 threads the plan splits K (B read in place by each task's packing);
  // on 1 it packs B, which then pays packing once. (128 columns would take direct_k on AVX-512,
  // in place on any pool.)
  const int64_t m = 128, k = 4096, n = 200;
  x86::GemmProblem shape;
  shape.M = m, shape.N = n, shape.K = k;
  shape.a = {nullptr, k, 1};
  shape.b = {nullptr, n, 1};
  shape.ldc = n;
  auto pays = [&](int threads) {
    return x86::GemmPlan::make(shape, x86::selected_isa(), threads)->prepacked_b_pays();
  };
  if (pays(2) || !pays(1)) {
    std::printf(
        "SKIPPED: on this CPU 128x200x4096 is not read in place on 2 threads and packed "
        "on 1; pool-size test not run\n");
    return;
  }
  const int threads_before = kiln::ThreadPool::global().num_threads();
  auto x = random_values(m * k, 12), w = random_values(k * n, 13);
  kiln::set_num_threads(2);
  kiln::Function f = kiln::jit([&](kiln::Tensor x) {
    return kiln::matmul(x, kiln::constant(w.data(), {k, n}, kiln::f32));
  });
  std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {m, k}, kiln::f32)};
  f(args);
  for (int threads : {1, 3, 2}) {
    INFO("threads " << threads);
    kiln::set_num_threads(threads);
    const x86::GemmStats before = x86::stats();
    std::vector<kiln::Array> out;
    for (int call = 0; call < 2; ++call) out = f(args);
    const x86::GemmStats after = x86::stats();
    CHECK(after.prepacked_calls - before.prepacked_calls == (pays(threads) ? 2 : 0));
    for (int64_t i = 0; i < m; i += 7)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t q = 0; q < k; ++q) {
          acc += double(x[i * k + q]) * w[q * n + j];
          mag += std::abs(double(x[i * k + q]) * w[q * n + j]);
        }
        REQUIRE(std::abs(out[0].data<float>()[i * n + j] - acc) <= 1e-6 * mag + 1e-6);
      }
  }
  kiln::set_num_threads(threads_before);
  CHECK(kernels_on(f, "x86") == 1);
  CHECK(f.stats().fallbacks == 0);
}

TEST_CASE("float64 matmul is not x86 work and is not a fallback",
          "[x86][backend]" KILN_NEEDS_LLVM) {
  std::vector<double> a(6, 1.0), b(6, 2.0);
  kiln::Function f = kiln::jit([](kiln::Tensor a, kiln::Tensor b) { return kiln::matmul(a, b); });
  auto out = f({kiln::Array::view(a.data(), {2, 3}, kiln::f64),
                kiln::Array::view(b.data(), {3, 2}, kiln::f64)});
  REQUIRE(out[0].data<double>()[0] == 6.0);
  REQUIRE(kernels_on(f, "llvm") == 1);
  REQUIRE(f.stats().fallbacks == 0);
}
