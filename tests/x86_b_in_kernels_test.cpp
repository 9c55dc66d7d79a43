// The Zen 5's rule for B packed by the kernels of the first row tile (gemm_driver.cpp,
// b_packed_in_kernels): which plans take it for a Zen 5's caches, whatever this host is, and GEMMs
// planned by it checked against the reference. (x86_blocking_test.cpp covers the split-256
// cores' rule, which takes it wherever it can.)
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"

#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

CacheSizes zen5_caches(int64_t l2_bytes, bool amd_zen5 = true) {
  CacheSizes c;
  c.l2_bytes = l2_bytes;
  c.amd_zen = true;
  c.amd_zen5 = amd_zen5;
  return c;
}

bool all_packed(const GemmPlan& plan) {
  for (const KernelInfo& k : plan.kernels())
    if (k.name.rfind("packed_", 0) != 0) return false;
  return true;
}

bool any_kernel_has(const GemmPlan& plan, const std::string& part) {
  for (const KernelInfo& k : plan.kernels())
    if (k.name.find(part) != std::string::npos) return true;
  return false;
}

// The rule, restated: at most 128 rows, K blocks of their own (not row tiles outer, K not split),
// B at least one panel wide, and B's share per column task past twice L2.
bool rule_takes(const Shape& s, Isa isa, int threads, const CacheSizes& caches) {
  const PackedBlocking b = packed_blocking(s.M, s.N, s.K, isa, threads, false, caches);
  const int64_t task_b_bytes = s.K * ceil_div(s.N, b.tn) * 4;
  return s.M <= 128 && !b.rows_outer && b.tk == 1 && s.N >= b.NR &&
         task_b_bytes > 2 * caches.l2_bytes;
}

}  // namespace

TEST_CASE("x86 b in kernels: a Zen 5 packs B in the first row tile's kernels for few rows",
          "[x86][blocking]") {
  // A Zen 5's 1 MiB L2: plans only, made for either ISA whatever this host runs (these shapes
  // are too big to check against the reference here; the case below runs smaller ones under a
  // smaller L2).
  const CacheSizes zen5 = zen5_caches(1 << 20);
  struct Want {
    Shape s;
    int threads;
    bool packs_b;
  };
  const Want wants[] = {
      {{32, 4096, 1024}, 2, true},    // 8 MiB of B per column task
      {{16, 4096, 1024}, 2, true},    // fewest rows of the packed path here
      {{128, 4096, 1024}, 2, true},   // the most rows
      {{129, 4096, 1024}, 2, false},  // past them
      {{32, 1024, 1024}, 2, false},   // 2 MiB per task: twice L2, not past it
      {{32, 1024, 1024}, 1, true},    // one thread: all 4 MiB
      {{64, 1200, 1200}, 2, true},    // 2.8 MiB per task
      {{512, 512, 512}, 2, false},
  };
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    for (const Want& w : wants) {
      GemmProblem p;  // no data: make() reads the shape and strides
      p.M = w.s.M, p.N = w.s.N, p.K = w.s.K;
      p.a = MatrixRef{nullptr, w.s.K, 1};
      p.b = MatrixRef{nullptr, w.s.N, 1};
      p.ldc = w.s.N;
      INFO(isa_name(isa) << " " << w.s.M << "x" << w.s.N << "x" << w.s.K << " on " << w.threads
                         << " threads");
      auto plan = GemmPlan::make(p, isa, w.threads, false, zen5);
      REQUIRE(all_packed(*plan));
      CHECK(rule_takes(w.s, isa, w.threads, zen5) == w.packs_b);
      const std::string packb = "_packb" + std::to_string(p.b.row_stride);
      CHECK(any_kernel_has(*plan, packb) == w.packs_b);
      // AVX-512's kernels otherwise pack A (one operand each).
      if (isa == Isa::avx512) CHECK(any_kernel_has(*plan, "_packa") == !w.packs_b);
      // Not without the Zen 5, nor for a B packed once.
      auto other = GemmPlan::make(p, isa, w.threads, false, zen5_caches(1 << 20, false));
      CHECK_FALSE(any_kernel_has(*other, packb));
      auto prepacked = GemmPlan::make(p, isa, w.threads, true, zen5);
      CHECK_FALSE(any_kernel_has(*prepacked, "_packb"));
    }
  }
}

TEST_CASE("x86 b in kernels: GEMMs that a Zen 5 packs B for in the kernels match the reference",
          "[x86][blocking][gemm]") {
  // A 64 KiB L2, so that B's of a few hundred KiB are past it. Row-major and padded B (rows N + 7
  // apart, off a line); M with and without an edge tile; N with and without an edge panel; K in
  // one block and several; epilogues cycled; run on 1-3 threads and inline.
  const CacheSizes zen5 = zen5_caches(64 << 10);
  const std::vector<Shape> shapes = {{40, 300, 200},  {35, 320, 700},  {14, 512, 300},
                                     {100, 288, 800}, {128, 333, 520}, {29, 1000, 130}};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    bool packs_b_seen = false;
    for (const Shape& s : shapes) {
      for (Layout lb : {Layout::row_major, Layout::padded}) {
        Case c(s, Layout::row_major, lb, kEpilogueCycle[variant % 4], uint32_t(9600 + variant));
        ++variant;
        const GemmProblem p = c.problem();
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " B " << layout_name(lb));
        auto plan = GemmPlan::make(p, isa, 2, false, zen5);
        if (!all_packed(*plan)) continue;  // a direct or skinny path: not this rule's
        const bool packs_b = any_kernel_has(*plan, "_packb" + std::to_string(p.b.row_stride));
        CHECK(packs_b == rule_takes(s, isa, 2, zen5));
        packs_b_seen |= packs_b;
        CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      }
    }
    CHECK(packs_b_seen);
  }
}
