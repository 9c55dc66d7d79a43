// C's last column on the dot path where N is one past a multiple of the vector width
// (edge_split.cpp): which problems take it, how it is counted, and each against the reference
// with every epilogue, B row-major, transposed (copied) or strided, A padded or reversed, on both
// ISAs and every pool.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

// The kernels of the plan for c's problem, by name up to their K.
std::vector<std::string> kernel_names(Case& c, Isa isa, int threads, bool prepacked = false) {
  std::vector<std::string> names;
  for (const KernelInfo& k : GemmPlan::make(c.problem(), isa, threads, prepacked)->kernels())
    names.push_back(k.name.substr(0, k.name.find('K')));
  return names;
}

}  // namespace

TEST_CASE("x86 gemm: C's last column one past the vector width takes the dot path",
          "[x86][gemm][edge_split]") {
  // Plans made on any host (only running needs the ISA).
  using Names = std::vector<std::string>;
  auto names = [](Shape s, Isa isa, int threads = 1) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 7000);
    return kernel_names(c, isa, threads);
  };
  CHECK(names({33, 33, 33}, Isa::avx512) == Names{"direct_avx512_M33N32", "dot_avx512_N33"});
  CHECK(names({33, 17, 33}, Isa::avx2) == Names{"direct_avx2_M33N16", "dot_avx2_N33"});
  CHECK(names({64, 17, 64}, Isa::avx512) == Names{"direct_avx512_M64N16", "dot_avx512_N64"});
  // Not: M * K under 512 (16x17x16), two columns past (34), N within one vector (1-16), a K
  // too short for the dot path (from 17 rows: K from 8), the direct_rows path on two threads.
  CHECK(names({16, 17, 16}, Isa::avx512) == Names{"direct_avx512_M16N17"});
  CHECK(names({33, 34, 33}, Isa::avx512) == Names{"direct_avx512_M33N34"});
  CHECK(names({33, 9, 33}, Isa::avx512) == Names{"direct_avx512_M33N9"});
  auto has_dot = [&](Shape s, Isa isa, int threads) {
    for (const std::string& n : names(s, isa, threads))
      if (n.rfind("dot_", 0) == 0) return true;
    return false;
  };
  CHECK(has_dot({16, 17, 32}, Isa::avx512, 1));
  CHECK_FALSE(has_dot({100, 17, 7}, Isa::avx512, 1));
  CHECK_FALSE(has_dot({200, 65, 200}, Isa::avx512, 2));
  {
    // A constant B: the packed path's panels, no split.
    Case c({33, 33, 33}, Layout::row_major, Layout::row_major, EpiKind{}, 7001);
    for (const std::string& n : kernel_names(c, Isa::avx512, 1, true))
      CHECK(n.rfind("packed_", 0) == 0);
  }
  // One thread's plan: the direct kernel and a dot plan of one chunk.
  {
    Case c({33, 33, 33}, Layout::row_major, Layout::row_major, EpiKind{}, 7003);
    CHECK(GemmPlan::make(c.problem(), Isa::avx512, 2)->caller_only());
    Case big({1000, 33, 1000}, Layout::row_major, Layout::row_major, EpiKind{}, 7004);
    CHECK_FALSE(GemmPlan::make(big.problem(), Isa::avx512, 2)->caller_only());
  }
  // Counted once, as a direct call and an edge split, not as a dot call.
  for (Isa isa : supported_isas()) {
    Case c({40, isa_lanes(isa) * 2 + 1, 64}, Layout::row_major, Layout::row_major, EpiKind{}, 7002);
    auto plan = GemmPlan::make(c.problem(), isa, 1);
    static kiln::ThreadPool pool(2);
    const GemmStats before = stats();
    plan->run(c.problem(), pool);
    const GemmStats after = stats();
    CHECK(after.calls - before.calls == 1);
    CHECK(after.direct_calls - before.direct_calls == 1);
    CHECK(after.edge_split_calls - before.edge_split_calls == 1);
    CHECK(after.dot_calls - before.dot_calls == 0);
    CHECK(c.max_violation() <= 1.0);
  }
}

TEST_CASE("x86 gemm: the edge split matches the reference", "[x86][gemm][edge_split]") {
  // N one past one to four vectors; M from one row (the dot path's group of 1) to 100 (groups of
  // 8 and a partial one); K from the dot path's bound to long, with vector tails. Every
  // epilogue, the column scale too (the last column's own bias, scale and residual element).
  const std::vector<int64_t> ms = {1, 8, 9, 33, 100};
  const std::vector<int64_t> ks = {64, 77, 130};
  const Layout a_layouts[] = {Layout::row_major, Layout::padded, Layout::reversed_rows};
  const Layout b_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::padded};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    int split = 0;
    for (int64_t M : ms) {
      for (int64_t q = 1; q <= 4; ++q) {
        for (int64_t K : ks) {
          const Shape s{M, q * isa_lanes(isa) + 1, K};
          const Layout la = a_layouts[variant % 3], lb = b_layouts[variant / 3 % 4];
          EpiKind e = kEpilogueCycle[variant % 4];
          e.col_scale = variant % 5 == 0;
          Case c(s, la, lb, e, uint32_t(7100 + variant));
          auto plan = GemmPlan::make(c.problem(), isa, 1);
          split += plan->kernels().size() == 2 && plan->kernels()[1].name.rfind("dot_", 0) == 0;
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " A " << layout_name(la)
                             << " B " << layout_name(lb) << " variant " << variant);
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
    }
    // M * K under the bound (one row) and the problems past the small volume (not the direct
    // path) keep their plan; the rest split.
    std::printf("%s: %d of 60 shapes split\n", isa_name(isa), split);
    CHECK(split >= 30);
  }
}
