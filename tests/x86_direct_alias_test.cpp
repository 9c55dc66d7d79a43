// The direct kernels read A's rows in place; where those rows fall into few L1 sets (row strides
// at or near a multiple of 4 KiB) an AVX-512 block holds at most direct_rows_cap rows
// (KernelDesc::rows_cap, "_r<rows>" in the kernel's name). Plans are made for stated caches, so
// the rule is checked on any host; the kernels run where the CPU has their ISA.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/generators.h"

#include <string>
#include <utility>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

CacheSizes caches_with(int64_t ways) {
  CacheSizes c;
  c.l2_bytes = 2 << 20;
  c.l1d_ways = ways;
  c.l1d_way_bytes = 4096;
  return c;
}

// A row-major M x K A with rows `row_stride` floats apart (B and C unused by the rule).
GemmProblem a_rows_apart(int64_t M, int64_t row_stride, int64_t col_stride = 1) {
  GemmProblem p;
  p.M = M, p.N = 16, p.K = 1024;
  p.a = {nullptr, row_stride, col_stride};
  return p;
}

}  // namespace

TEST_CASE("x86 gemm: the direct kernels' rows per block where A's rows share L1 sets",
          "[x86][gemm][direct_rows]") {
  const CacheSizes twelve = caches_with(12), eight = caches_with(8);
  // 4 KiB apart (1024 floats, or one more line): every row in one set; two ways left to B and C.
  CHECK(direct_rows_cap(a_rows_apart(100, 1024), Isa::avx512, twelve) == 10);
  CHECK(direct_rows_cap(a_rows_apart(100, 1024), Isa::avx512, eight) == 6);
  CHECK(direct_rows_cap(a_rows_apart(100, -1024), Isa::avx512, twelve) == 10);  // reversed rows
  CHECK(direct_rows_cap(a_rows_apart(100, 4096), Isa::avx512, twelve) == 10);
  // 16 rows before the next set:
  CHECK(direct_rows_cap(a_rows_apart(100, 1025), Isa::avx512, twelve) == 10);
  // 2 KiB apart: two sets; 1 KiB: four, room for every tiling's rows.
  CHECK(direct_rows_cap(a_rows_apart(100, 512), Isa::avx512, twelve) == 20);
  CHECK(direct_rows_cap(a_rows_apart(100, 256), Isa::avx512, twelve) == 0);
  // Rows that spread over the sets, share lines, or are not runs: no cap.
  CHECK(direct_rows_cap(a_rows_apart(100, 1000), Isa::avx512, twelve) == 0);
  CHECK(direct_rows_cap(a_rows_apart(100, 1031), Isa::avx512, twelve) == 0);
  CHECK(direct_rows_cap(a_rows_apart(100, 0), Isa::avx512, twelve) == 0);
  CHECK(direct_rows_cap(a_rows_apart(100, 8), Isa::avx512, twelve) == 0);
  CHECK(direct_rows_cap(a_rows_apart(100, 1, 1024), Isa::avx512, twelve) == 0);
  CHECK(direct_rows_cap(a_rows_apart(1, 1024), Isa::avx512, twelve) == 0);
  CHECK(direct_rows_cap(a_rows_apart(12, 1024), Isa::avx512, twelve) == 0);  // no more than ways
  CHECK(direct_rows_cap(a_rows_apart(13, 1024), Isa::avx512, twelve) == 10);
  CHECK(direct_rows_cap(a_rows_apart(100, 1024), Isa::avx2, twelve) == 0);  // 12 rows at most

  // The tiling under a cap: fewer rows of one vector, or a narrower tile that still takes M.
  auto tiling = [](bool avx512, int64_t M, int64_t N, int64_t cap) {
    const DirectTiling t = direct_tiling(avx512, M, N, cap);
    return std::pair<int, int>{t.rows_max, t.vectors};
  };
  CHECK(tiling(true, 100, 16, 0) == std::pair<int, int>{28, 1});
  CHECK(tiling(true, 100, 16, 10) == std::pair<int, int>{10, 1});
  CHECK(tiling(true, 10, 64, 10) == std::pair<int, int>{10, 2});
  CHECK(tiling(true, 100, 64, 10) == std::pair<int, int>{6, 4});
  CHECK(tiling(false, 100, 8, 6) == std::pair<int, int>{6, 1});
}

TEST_CASE("x86 gemm: direct, direct_rows and direct_k kernels with A's rows 4 KiB apart",
          "[x86][gemm][direct_rows]") {
  // Each path's AVX-512 kernels carry the cap where A's rows are 4 KiB apart (row-major, or
  // reversed), and not where its rows are padded (7 floats more: they spread); the skinny path
  // (B's rows a page apart, few rows) and AVX2 keep their own blocks. Every epilogue, on every
  // pool.
  const CacheSizes twelve = caches_with(12);
  struct Expect {
    Shape s;
    bool capped;  // where A's rows are 4 KiB apart
    int threads = 2;
    // Where A's rows are 4 KiB apart, the capped blocks split over the threads: no kernel over
    // the cap.
    bool chunks_within_cap = false;
  };
  const std::vector<Expect> cases = {
      {{20, 8, 1024}, true, 1},         // the small volume: one kernel
      {{20, 8, 1024}, false, 2, true},  // on 2 threads: two chunks of 10 rows (one block of 20
                                        // where the rows spread)
      {{100, 16, 1024}, true},          // direct_rows
      {{61, 24, 2048}, true},           // direct_rows, an edge of 8 columns
      {{16, 16, 4096}, true},           // direct_k
      {{12, 4096, 1024}, false}         // skinny
  };
  const Layout layouts[] = {Layout::row_major, Layout::reversed_rows, Layout::padded};
  int variant = 0;
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    for (const Expect& x : cases) {
      for (Layout la : layouts) {
        const EpiKind e = kEpilogueCycle[variant % 4];
        Case c(x.s, la, Layout::row_major, e, uint32_t(7600 + variant++));
        auto plan = GemmPlan::make(c.problem(), isa, x.threads, false, twelve);
        const bool crowded = la != Layout::padded && isa == Isa::avx512;
        const bool capped = x.capped && crowded;
        INFO(isa_name(isa) << " " << x.s.M << "x" << x.s.N << "x" << x.s.K << " A "
                           << layout_name(la));
        // Kernels over more rows than the cap carry it (a chunk of fewer rows has no need).
        int with_cap = 0, over_cap = 0;
        for (const KernelInfo& k : plan->kernels()) {
          if (k.name.rfind("direct_", 0) != 0) continue;
          const size_t m = k.name.find("_M") + 2;
          over_cap += std::stoll(k.name.substr(m, k.name.find('N', m) - m)) > 10;
          with_cap += k.name.find("_r10") != std::string::npos;
        }
        if (isa == Isa::avx512) CHECK((over_cap > 0) == !(x.chunks_within_cap && crowded));
        CHECK(with_cap == (capped ? over_cap : 0));
        if (isa_supported(isa)) CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      }
    }
  }
  // Where the tiling's tiles are no taller than the cap (4 vectors: 6 rows), no kernel of its own.
  Case c({100, 64, 1024}, Layout::row_major, Layout::row_major, EpiKind{}, 7700);
  for (const KernelInfo& k : GemmPlan::make(c.problem(), Isa::avx512, 2, false, twelve)->kernels())
    CHECK(k.name.find("_r10") == std::string::npos);
}
