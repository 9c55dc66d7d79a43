// The x86 backend's operands as the JIT hands them over: transposed, strided and batched operands
// and x @ w.T's weight read in place, every dim symbolic on each call's exact plan, constant
// weights packed once where that pays (and read in place where not, on any pool size), and
// float64 matmuls left to LLVM without counting a fallback.
#include <kiln/kiln.h>

#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"
#include "needs_llvm.h"
#include "x86_backend_testing.h"

#include <cstdio>
#include <vector>

using namespace kiln::x86::testing;

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
