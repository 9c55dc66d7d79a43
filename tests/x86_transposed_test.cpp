// x.T @ w with a few columns of C run as its transpose (transposed_path.cpp): which problems take
// it, how it is counted, the transpose into C, and each against the reference with every
// epilogue, A transposed or transposed with padding, B in every layout, on both ISAs and every
// pool.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/pack.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

// Whether the plan for s (A transposed, B row-major) runs the transposed problem: its kernels
// are then over N rows of M columns ("_M<N>N<chunk>"). On a machine of `caches`: the host's,
// with cores that split 256-bit ops (split_256) or Intel's (neither split_256 nor amd_zen),
// unless said.
CacheSizes host_caches(bool split_256) {
  CacheSizes c = host_cpu().caches;
  c.split_256 = split_256;
  c.amd_zen = split_256;
  c.amd_zen5 = false;
  return c;
}
bool takes_transposed(Shape s, Isa isa, int threads = 2, Layout la = Layout::transposed,
                      const CacheSizes& caches = host_caches(false)) {
  Case c(s, la, Layout::row_major, EpiKind{}, 9000);
  const std::string prefix =
      std::string("direct_") + isa_name(isa) + "_M" + std::to_string(s.N) + "N";
  for (const KernelInfo& k : GemmPlan::make(c.problem(), isa, threads, false, caches)->kernels())
    if (k.name.rfind(prefix, 0) != 0) return false;
  return true;
}

// A Zen 3's caches (AVX2 there runs 256-bit ops whole: amd_zen, not split_256).
CacheSizes zen3_caches() { return CacheSizes{512 << 10, 8, 4096, false, 32 << 20, true}; }

// Whether `plan` runs c's problem as the transpose: run once (on the host, which must have the
// plan's ISA), by the counter that moved.
bool runs_transposed(const GemmPlan& plan, Case& c) {
  static kiln::ThreadPool pool(2);
  const GemmStats before = stats();
  plan.run(c.problem(), pool);
  return stats().transposed_calls > before.transposed_calls;
}

// Each shape on 1 and 2 threads, planned for `caches` on `isa`: the plan runs the transposed
// problem and matches the reference (every pool). Variants cycle the epilogues (a column scale
// every third), A transposed or padded, B in every layout; seeds from `seed`.
void check_wide_transposed(const std::vector<Shape>& shapes, Isa isa, const CacheSizes& caches,
                           uint32_t seed) {
  const Layout a_layouts[] = {Layout::transposed, Layout::transposed_padded};
  const Layout b_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::padded, Layout::reversed_rows};
  int variant = 0;
  for (const Shape& s : shapes) {
    for (int threads : {1, 2}) {
      const Layout la = a_layouts[variant % 2], lb = b_layouts[variant / 2 % 5];
      EpiKind e = kEpilogueCycle[variant % 4];
      e.col_scale = variant % 3 == 0;
      Case c(s, la, lb, e, seed + uint32_t(variant));
      INFO(s.M << "x" << s.N << "x" << s.K << " threads " << threads << " A " << layout_name(la)
               << " B " << layout_name(lb) << " variant " << variant);
      auto plan = GemmPlan::make(c.problem(), isa, threads, false, caches);
      CHECK(runs_transposed(*plan, c));
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      ++variant;
    }
  }
}

}  // namespace

TEST_CASE("x86 gemm: x.T @ w with 2-8 columns runs as its transpose", "[x86][gemm][transposed]") {
  // Plans made on any host (only running needs the ISA). AVX-512: up to 8 columns; up to 4 from
  // K 16, 5-8 from K 128 or up to 128 rows.
  CHECK(takes_transposed({768, 4, 128}, Isa::avx512));
  CHECK(takes_transposed({1000, 2, 16}, Isa::avx512));
  CHECK(takes_transposed({1000, 8, 128}, Isa::avx512));
  CHECK(takes_transposed({128, 8, 64}, Isa::avx512));
  CHECK(takes_transposed({9, 2, 100}, Isa::avx512));
  CHECK(takes_transposed({4096, 8, 2048}, Isa::avx512, 1));
  CHECK_FALSE(takes_transposed({1000, 8, 127}, Isa::avx512));
  CHECK_FALSE(takes_transposed({129, 8, 64}, Isa::avx512));
  CHECK_FALSE(takes_transposed({1000, 9, 1000}, Isa::avx512));  // past half a vector
  CHECK_FALSE(takes_transposed({1000, 4, 15}, Isa::avx512));
  CHECK_FALSE(takes_transposed({16, 4, 16}, Isa::avx512));   // M x K under 512
  CHECK_FALSE(takes_transposed({8, 4, 1000}, Isa::avx512));  // M within half a vector
  // AVX2: up to 4 columns, 3-4 from K 128 or up to 128 rows.
  CHECK(takes_transposed({768, 2, 512}, Isa::avx2));
  CHECK(takes_transposed({768, 4, 128}, Isa::avx2));
  CHECK(takes_transposed({103, 4, 64}, Isa::avx2));
  CHECK_FALSE(takes_transposed({1000, 4, 64}, Isa::avx2));
  CHECK_FALSE(takes_transposed({768, 5, 512}, Isa::avx2));
  // Cores that split 256-bit ops, AVX2: up to 4 columns from K 8 at any M past half a vector,
  // 5-8 from K 64 past a whole vector of rows (the transposed problem must not come back). Zen
  // cores that run 256-bit ops whole (amd_zen) take the same rule.
  CacheSizes zen = host_caches(false);
  zen.amd_zen = true;
  const Layout at = Layout::transposed;
  for (const CacheSizes& m : {host_caches(true), zen}) {
    INFO("split_256 " << m.split_256);
    CHECK(takes_transposed({1000, 4, 64}, Isa::avx2, 2, at, m));
    CHECK(takes_transposed({1000, 2, 8}, Isa::avx2, 2, at, m));
    CHECK(takes_transposed({768, 5, 512}, Isa::avx2, 2, at, m));
    CHECK(takes_transposed({300, 7, 300}, Isa::avx2, 2, at, m));
    CHECK(takes_transposed({9, 8, 64}, Isa::avx2, 1, at, m));
    CHECK_FALSE(takes_transposed({1000, 2, 7}, Isa::avx2, 2, at, m));
    CHECK_FALSE(takes_transposed({1000, 8, 63}, Isa::avx2, 2, at, m));
    CHECK_FALSE(takes_transposed({8, 5, 1000}, Isa::avx2, 2, at, m));
    // Past a vector of columns: on split cores, never; on the others the wide rule takes a tall
    // C (see the test of it below).
    CHECK(takes_transposed({1000, 9, 1000}, Isa::avx2, 2, at, m) == !m.split_256);
    CHECK_FALSE(takes_transposed({100, 9, 1000}, Isa::avx2, 2, at, m));
    CHECK_FALSE(takes_transposed({4, 3, 1000}, Isa::avx2, 2, at, m));
    // ... AVX-512 keeps its rule there.
    CHECK_FALSE(takes_transposed({1000, 5, 64}, Isa::avx512, 2, at, m));
  }
  // A's rows as runs (not transposed), or A strided both ways: not this path.
  CHECK_FALSE(takes_transposed({768, 4, 128}, Isa::avx512, 2, Layout::row_major));
  CHECK_FALSE(takes_transposed({768, 4, 128}, Isa::avx512, 2, Layout::strided));
  CHECK(takes_transposed({768, 4, 128}, Isa::avx512, 2, Layout::transposed_padded));
  {
    // A constant B: a plan for a PackedB never takes it; B is read in place, so packing it once
    // does not pay.
    Case c({768, 4, 128}, Layout::transposed, Layout::row_major, EpiKind{}, 9001);
    CHECK_FALSE(GemmPlan::make(c.problem(), Isa::avx512, 2)->prepacked_b_pays());
    for (const KernelInfo& k : GemmPlan::make(c.problem(), Isa::avx512, 2, true)->kernels())
      CHECK(k.name.rfind("packed_", 0) == 0);
  }
  // Counted as a transposed call, and as the transposed problem's path.
  for (Isa isa : supported_isas()) {
    Case c({300, 3, 200}, Layout::transposed, Layout::row_major, EpiKind{}, 9002);
    auto plan = GemmPlan::make(c.problem(), isa, 2);
    static kiln::ThreadPool pool(2);
    const GemmStats before = stats();
    plan->run(c.problem(), pool);
    const GemmStats after = stats();
    CHECK(after.calls - before.calls == 1);
    CHECK(after.transposed_calls - before.transposed_calls == 1);
    CHECK(after.direct_calls + after.skinny_calls - before.direct_calls - before.skinny_calls == 1);
    CHECK(c.max_violation() <= 1.0);
  }
}

TEST_CASE("x86 gemm: transpose_rows_into writes C's first N columns only",
          "[x86][gemm][transposed]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX; transpose_rows_into not run\n");
    return;
  }
  for (int64_t N = 1; N <= 8; ++N) {
    for (int64_t M : {0, 1, 7, 8, 9, 16, 23}) {
      const int64_t ss = M + 3, ldc = N + 2;
      std::vector<float> s(size_t(8 * ss + 1)), c(size_t((M + 1) * ldc), -1.0f);
      for (size_t i = 0; i < s.size(); ++i) s[i] = float(i);
      transpose_rows_into(s.data(), ss, N, M, c.data(), ldc);
      INFO("N " << N << " M " << M);
      for (int64_t i = 0; i <= M; ++i)
        for (int64_t j = 0; j < ldc; ++j)
          CHECK(c[size_t(i * ldc + j)] == (i < M && j < N ? s[size_t(j * ss + i)] : -1.0f));
    }
  }
}

TEST_CASE("x86 gemm: x.T @ w run as its transpose matches the reference",
          "[x86][gemm][transposed]") {
  // M with a tail past the 8x8 transposes (9, 100, 1001) and a multiple of 8 (768); N from 2 to
  // the ISA's half vector; K short to long (the transposed problem on the direct, direct_rows and
  // skinny paths). Every epilogue, the column scale too; B in every layout.
  const std::vector<Shape> shapes = {{9, 2, 100},    {100, 3, 40},  {768, 4, 128}, {1001, 2, 300},
                                     {100, 5, 64},   {64, 8, 64},   {300, 7, 300}, {1001, 8, 256},
                                     {200, 6, 1500}, {130, 4, 4100}};
  const Layout a_layouts[] = {Layout::transposed, Layout::transposed_padded};
  const Layout b_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::padded, Layout::reversed_rows};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    // On cores that split 256-bit ops AVX2 takes up to 8 columns.
    for (bool split : {false, true}) {
      if (split && isa != Isa::avx2) continue;
      int taken = 0;
      for (const Shape& s : shapes) {
        if (2 * s.N > isa_lanes(isa) && !split) continue;
        for (int threads : {1, 2}) {
          const Layout la = a_layouts[variant % 2], lb = b_layouts[variant / 2 % 5];
          EpiKind e = kEpilogueCycle[variant % 4];
          e.col_scale = variant % 3 == 0;
          Case c(s, la, lb, e, uint32_t(9100 + variant));
          auto plan = GemmPlan::make(c.problem(), isa, threads, false, host_caches(split));
          const std::string first = plan->kernels()[0].name;
          taken +=
              first.rfind(std::string("direct_") + isa_name(isa) + "_M" + std::to_string(s.N) + "N",
                          0) == 0;
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads " << threads
                             << " A " << layout_name(la) << " B " << layout_name(lb) << " variant "
                             << variant << " first kernel " << first);
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
      // Only 100x5x64 (129 rows or fewer: taken) and AVX2's 3-4 columns with K under 128 past 128
      // rows keep their plan; on split cores, none.
      std::printf("%s%s: %d plans run as the transpose\n", isa_name(isa),
                  split ? " (cores that split 256-bit ops)" : "", taken);
      CHECK(taken >= (isa == Isa::avx512 ? 20 : split ? 20 : 8));
    }
  }
}

TEST_CASE("x86 gemm: transpose_into writes C's first N columns for any N",
          "[x86][gemm][transposed]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX; transpose_into not run\n");
    return;
  }
  // N past the 8 rows of one transpose_rows_into, with a remainder or none; M within, at and
  // past kTransposeBlockRows, with and without a tail past the 8x8 transposes.
  for (int64_t N : {1, 8, 9, 16, 17, 64, 65}) {
    for (int64_t M : {0, 1, 7, 63, 64, 65, 130}) {
      const int64_t ss = M + 3, ldc = N + 2;
      std::vector<float> s(size_t(N * ss + 1)), c(size_t((M + 1) * ldc), -1.0f);
      for (size_t i = 0; i < s.size(); ++i) s[i] = float(i);
      transpose_into(s.data(), ss, N, M, c.data(), ldc);
      INFO("N " << N << " M " << M);
      int64_t wrong = 0;
      for (int64_t i = 0; i <= M; ++i)
        for (int64_t j = 0; j < ldc; ++j)
          wrong += c[size_t(i * ldc + j)] != (i < M && j < N ? s[size_t(j * ss + i)] : -1.0f);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("x86 gemm: x.T @ w of up to 64 columns over a tall C runs as its transpose on Zen",
          "[x86][gemm][transposed]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2; the Zen AVX2 plans are not run\n");
    return;
  }
  // Which plans take it (transposed_path.cpp, wide_pays): Zen cores that run 256-bit ops whole,
  // AVX2, past a vector of columns up to 64, M at least 16 N, K at least 512 (256 up to 32
  // columns), C^T within the scratch bound.
  const CacheSizes zen3 = zen3_caches();
  auto taken = [&](Shape s, Layout la = Layout::transposed, Layout lb = Layout::row_major,
                   const CacheSizes& caches = zen3_caches(), Isa isa = Isa::avx2) {
    Case c(s, la, lb, EpiKind{}, 9200);
    return runs_transposed(*GemmPlan::make(c.problem(), isa, 2, false, caches), c);
  };
  CHECK(taken({512, 32, 512}));
  CHECK(taken({144, 9, 512}));
  CHECK(taken({1024, 64, 512}));
  CHECK(taken({1000, 16, 1000}, Layout::transposed_padded));
  CHECK(taken({512, 32, 512}, Layout::transposed, Layout::transposed));
  CHECK_FALSE(taken({1023, 64, 512}));  // fewer than 16 rows a column
  CHECK_FALSE(taken({1024, 64, 511}));  // K short
  CHECK(taken({1000, 32, 256}));
  CHECK_FALSE(taken({1000, 32, 255}));
  CHECK(taken({600, 33, 512}));
  CHECK_FALSE(taken({600, 33, 511}));
  CHECK_FALSE(taken({2000, 65, 1000}));  // past 64 columns
  CHECK_FALSE(taken({32769, 64, 512}));  // C^T past the scratch bound
  CHECK_FALSE(taken({512, 32, 512}, Layout::row_major));
  CHECK_FALSE(taken({512, 32, 512}, Layout::strided));
  CacheSizes xeon = zen3;
  xeon.amd_zen = false;
  CacheSizes zen1 = zen3;
  zen1.split_256 = true;
  CHECK_FALSE(taken({512, 32, 512}, Layout::transposed, Layout::row_major, xeon));
  CHECK_FALSE(taken({512, 32, 512}, Layout::transposed, Layout::row_major, zen1));
  if (isa_supported(Isa::avx512))
    CHECK_FALSE(taken({512, 32, 512}, Layout::transposed, Layout::row_major, zen3, Isa::avx512));
  {
    // A constant B is not worth packing once: the transposed plan reads it on every call.
    Case c({512, 32, 512}, Layout::transposed, Layout::row_major, EpiKind{}, 9201);
    CHECK_FALSE(GemmPlan::make(c.problem(), Isa::avx2, 2, false, zen3)->prepacked_b_pays());
  }

  // Against the reference: N just past a vector, odd, a multiple of 8 and 64; M with tails past
  // the transposes' 8 and kTransposeBlockRows; every epilogue (the column scale too), A
  // transposed or padded, B in every layout, 1 and 2 threads, every pool.
  const std::vector<Shape> shapes = {{144, 9, 512},  {333, 17, 515},  {400, 24, 600},
                                     {700, 20, 700}, {1024, 64, 512}, {1100, 40, 530},
                                     {600, 30, 300}};
  check_wide_transposed(shapes, Isa::avx2, zen3, 9300);
}

TEST_CASE("x86 gemm: on a Zen 5, AVX-512 runs x.T @ w of 17-64 columns as its transpose",
          "[x86][gemm][transposed]") {
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; the Zen 5's AVX-512 plans are not run\n");
    return;
  }
  // transposed_path.cpp, wide_pays: the Zen 3's AVX2 rule (past a vector of columns, here 16, up
  // to 64; M at least 16 N; K at least 512, 256 up to 32 columns), where direct_k does not fit
  // (a C of more than 32 Ki floats here).
  CacheSizes zen5 = zen3_caches();
  zen5.l2_bytes = 1 << 20;
  zen5.amd_zen5 = true;
  auto taken = [&](Shape s, const CacheSizes& caches, int threads = 2) {
    Case c(s, Layout::transposed, Layout::row_major, EpiKind{}, 9400);
    return runs_transposed(*GemmPlan::make(c.problem(), Isa::avx512, threads, false, caches), c);
  };
  CHECK(taken({1100, 40, 530}, zen5));
  CHECK(taken({2048, 17, 256}, zen5));
  CHECK(taken({1040, 64, 512}, zen5));
  CHECK_FALSE(taken({2048, 16, 512}, zen5));           // one vector of columns: the narrow rule's
  CHECK_FALSE(taken({1024, 32, 1024}, zen5));          // C of 32 Ki floats: direct_k
  CHECK_FALSE(taken({1040, 64, 511}, zen5));           // K short
  CHECK_FALSE(taken({1100, 40, 530}, zen3_caches()));  // not the Zen 5
  // Against the reference, as the Zen 3's case above: N just past a vector, odd, 64; M with
  // tails; every epilogue (the column scale too); A transposed or padded; B in every layout; 1
  // and 2 threads; every pool.
  const std::vector<Shape> shapes = {
      {2048, 17, 256}, {1100, 40, 530}, {1040, 64, 512}, {1500, 33, 600}};
  check_wide_transposed(shapes, Isa::avx512, zen5, 9450);
}
