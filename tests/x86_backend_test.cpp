// The x86 backend as the JIT uses it: float32 matmuls with supported epilogues run on it (counted
// in stats()), unsupported epilogues split off into an LLVM kernel while the GEMM stays on x86,
// and results match a double-precision reference for every path.
#include <kiln/kiln.h>

#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "needs_llvm.h"
#include "x86_backend_testing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

using namespace kiln::x86::testing;

namespace {

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
