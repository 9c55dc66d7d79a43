// The x86 GEMM's fused epilogues (bias, scale, residual, activations) against the
// double-accumulating reference: every epilogue on every path, activations over a wide input
// range, GELU's exact tails, and no activation computing on denormals.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"

#include <xmmintrin.h>

#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

TEST_CASE("x86 gemm: every epilogue on every path", "[x86][gemm][epilogue]") {
  // direct (small, and split over M in two unequal chunks at 100x130x50), skinny (M <= 16 or 32,
  // one and several K blocks), packed with one and with several K blocks, edges everywhere; every
  // combination of bias, scale, residual (added, or on alternate variants multiplying) and column
  // scale. The last three shapes are GEMV-like (stream, dot over B's or A's rows).
  const std::vector<Shape> shapes = {
      {1, 1, 1},      {3, 5, 2},      {16, 16, 16},    {23, 57, 91},   {1, 4096, 64},
      {6, 333, 100},  {64, 64, 64},   {100, 130, 50},  {77, 200, 700}, {128, 96, 1024},
      {1, 300, 1100}, {5, 260, 1300}, {40, 100, 2200},  // three K blocks (KC is at most 1024)
      {16, 333, 200}, {30, 300, 150},  // skinny on AVX-512 (up to 32 rows), AVX2 up to 16
      {1, 2048, 512}, {3, 700, 900},  {900, 3, 700},   {700, 1, 300}};
  const Activation acts[] = {Activation::none, Activation::relu, Activation::gelu,
                             Activation::gelu_tanh, Activation::silu};
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      int variant = 0;
      for (Activation act : acts) {
        for (int flags = 0; flags < 16; ++flags) {
          EpiKind e{act,
                    (flags & 1) != 0,
                    (flags & 2) != 0,
                    (flags & 4) != 0,
                    (flags & 4) != 0 && variant % 2,
                    (flags & 8) != 0};
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " act " << int(act)
                             << " bias " << e.bias << " scale " << e.scale << " residual "
                             << e.residual << " gate " << e.gate << " column scale "
                             << e.col_scale);
          // Alternate layouts so epilogues are also seen with transposed operands.
          const Layout la = variant % 3 == 1 ? Layout::transposed : Layout::row_major;
          const Layout lb = variant % 4 == 2 ? Layout::transposed : Layout::row_major;
          Case c(s, la, lb, e, uint32_t(1000 + variant * 17 + s.K));
          c.run(pool2(), isa);
          CHECK(c.max_violation() <= 1.0);
          ++variant;
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: activations over a wide input range", "[x86][gemm][epilogue]") {
  // K = 1 and A = 1 puts B's values (-30..30) straight into the activation.
  for (Isa isa : supported_isas()) {
    for (Activation act :
         {Activation::relu, Activation::gelu, Activation::gelu_tanh, Activation::silu}) {
      INFO(isa_name(isa) << " act " << int(act));
      Case c({3, 1200, 1}, Layout::row_major, Layout::row_major, EpiKind{act, true, false, false},
             7);
      c.fill_ramp_b(-30.0f, 30.0f);
      c.run(pool2(), isa);
      CHECK(c.max_violation() <= 1.0);
    }
  }
}

TEST_CASE("x86 gemm: gelu is exactly x above 5.6 and 0 below -5.6, at any magnitude",
          "[x86][gemm][epilogue]") {
  // Past erf's clamp (vec_emit.cpp) the emitted ratio must come to exactly 1/2: one ulp more made
  // gelu(-1e18) 6e10. K = 1 and A = 1 put B's values straight into the activation; 3 and 64 rows,
  // 40 columns (a partial vector at the end).
  const float big[] = {5.6f, 5.7f, 6.0f, 10.0f, 1e3f, 1e6f, 1e18f, 1e30f, 3e38f};
  for (Isa isa : supported_isas()) {
    for (int64_t M : {3, 64}) {
      INFO(isa_name(isa) << " M " << M);
      const int64_t N = 40;
      std::vector<float> a(static_cast<size_t>(M), 1.0f), b(static_cast<size_t>(N)),
          c(static_cast<size_t>(M * N));
      for (int64_t j = 0; j < N; ++j) {
        const float x = big[size_t(j / 2) % std::size(big)];
        b[size_t(j)] = j % 2 ? -x : x;
      }
      GemmProblem p;
      p.M = M, p.N = N, p.K = 1;
      p.a = MatrixRef{a.data(), 1, 1};
      p.b = MatrixRef{b.data(), N, 1};
      p.c = c.data();
      p.ldc = N;
      p.epi.act = Activation::gelu;
      gemm(p, pool2(), isa);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const float x = b[size_t(j)];
          INFO("x " << x);
          CHECK(c[size_t(i * N + j)] == (x > 0 ? x : 0.0f));
        }
    }
  }
}

TEST_CASE("x86 gemm: activations never compute on denormals", "[x86][gemm][epilogue]") {
  // An op with a denormal operand costs a microcode assist on Intel cores (~100+ cycles); a
  // gelu epilogue that made e^{-x^2/2} terms denormal ran 1.5x slower than the GEMM under it.
  // MXCSR's sticky DE flag (bit 1) records any denormal operand on this thread, so each problem
  // runs on the calling thread (run_on without a pool), on direct, skinny and packed paths, with
  // activation inputs over [-100, 100].
  constexpr unsigned kFlags = 0x3f, kDenormalOperand = 0x2;
  for (Isa isa : supported_isas()) {
    for (Activation act :
         {Activation::relu, Activation::gelu, Activation::gelu_tanh, Activation::silu}) {
      for (Shape s : {Shape{3, 40, 1}, Shape{5, 1200, 1}, Shape{64, 1200, 8}}) {
        INFO(isa_name(isa) << " act " << int(act) << " " << s.M << "x" << s.N << "x" << s.K);
        Case c(s, Layout::row_major, Layout::row_major, EpiKind{act, false, false, false}, 11);
        c.fill_ramp_b(-100.0f / float(s.K), 100.0f / float(s.K));
        const GemmProblem p = c.problem();
        auto plan = GemmPlan::make(p, isa, 1);
        _mm_setcsr(_mm_getcsr() & ~kFlags);
        plan->run_on(p, nullptr);
        const unsigned flags = _mm_getcsr() & kFlags;
        CHECK((flags & kDenormalOperand) == 0);
        CHECK(c.max_violation() <= 1.0);
      }
    }
  }
}
