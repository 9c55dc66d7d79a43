// The stream path over a few rows of C (stream_path.cpp, stream_rows_for; stream_rows_kernel.cpp):
// which problems take it (planned for a Zen 3's caches on any host), and each against the
// reference over M of 2-12 (row pairs and an odd row), chunk edges, K's remainders past its
// passes of four rows, A transposed or padded, B's rows a page or more apart (narrow views
// too), C and the residual padded, every epilogue, plans for 1-3 threads run on pools of 1-3 and
// none.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

// A Zen 3's caches (AMD EPYC 7xx3: 512 KiB of L2 a core, 256-bit ops whole).
const CacheSizes kZen3{512 << 10, 8, 4096, false, 32 << 20, true};

bool avx2_runs() {
  const std::vector<Isa> isas = supported_isas();
  return std::find(isas.begin(), isas.end(), Isa::avx2) != isas.end();
}

// Whether the plan's kernels are the stream kernels over rows ("stream_avx2_M...").
bool stream_rows_plan(const GemmPlan& plan) {
  const std::vector<KernelInfo> ks = plan.kernels();
  return !ks.empty() && std::all_of(ks.begin(), ks.end(), [](const KernelInfo& k) {
    return k.name.rfind("stream_avx2_M", 0) == 0;
  });
}

bool takes_stream_rows(Shape s, Layout la, Layout lb, const CacheSizes& caches,
                       bool prepacked = false, bool dynamic_m = false) {
  Case c(s, la, lb, EpiKind{}, 7100);
  GemmProblem p = c.problem();
  p.dynamic_m = dynamic_m;
  return stream_rows_plan(*GemmPlan::make(p, Isa::avx2, 2, prepacked, caches));
}

}  // namespace

TEST_CASE(
    "x86 gemm: AVX2 on Zen cores takes the stream path over a few rows with B's rows a page apart",
    "[x86][gemm][stream]") {
  if (!avx2_runs()) {
    std::printf("SKIPPED: this CPU runs no AVX2 kernels\n");
    return;
  }
  const Layout rm = Layout::row_major;
  // 2 to 12 rows, B's rows at least 4 KiB apart, K from 32 (each over the small volume, 64^3,
  // which takes the direct path).
  CHECK(takes_stream_rows({8, 4096, 1024}, rm, rm, kZen3));
  CHECK(takes_stream_rows({2, 1024, 512}, rm, rm, kZen3));
  CHECK(takes_stream_rows({12, 2048, 32}, rm, rm, kZen3));
  CHECK(takes_stream_rows({5, 12, 5000}, rm, Layout::wide_padded, kZen3));
  CHECK(takes_stream_rows({6, 1024, 100}, Layout::transposed, rm, kZen3));
  // Not past 12 rows, under K = 32, under a page, for a B prepacked, for M symbolic, for one
  // row (the GEMV's own stream kernel), on Intel's cores or on cores that split 256-bit ops.
  CHECK_FALSE(takes_stream_rows({13, 4096, 1024}, rm, rm, kZen3));
  CHECK_FALSE(takes_stream_rows({8, 4096, 31}, rm, rm, kZen3));
  CHECK_FALSE(takes_stream_rows({8, 1000, 1000}, rm, rm, kZen3));
  CHECK_FALSE(takes_stream_rows({8, 4096, 1024}, rm, rm, kZen3, /*prepacked=*/true));
  CHECK_FALSE(takes_stream_rows({8, 4096, 1024}, rm, rm, kZen3, false, /*dynamic_m=*/true));
  CHECK_FALSE(takes_stream_rows({1, 4096, 1024}, rm, rm, kZen3));
  CHECK_FALSE(takes_stream_rows({8, 4096, 1024}, rm, rm, intel_caches()));
  CacheSizes zen1 = kZen3;
  zen1.split_256 = true;
  CHECK_FALSE(takes_stream_rows({8, 4096, 1024}, rm, rm, zen1));
  // Chunks: M rows of C and B's four rows within 24 KiB, B's rows not counted for one pair of rows
  // (read once a pass); as even as that allows over the threads (stream_path.cpp).
  auto chunk_cols = [&](Shape s) {
    Case c(s, rm, rm, EpiKind{}, 7102);
    const std::string name =
        GemmPlan::make(c.problem(), Isa::avx2, 2, false, kZen3)->kernels().at(0).name;
    return name.substr(0, name.find("_a", name.find("_M")));
  };
  CHECK(chunk_cols({2, 4096, 64}) == "stream_avx2_M2N2048");  // 3072 fit, 2048 a thread
  CHECK(chunk_cols({2, 8192, 64}) == "stream_avx2_M2N2736");  // 3 chunks of at most 3072
  CHECK(chunk_cols({3, 4096, 64}) == "stream_avx2_M3N824");   // 872 fit: 5 chunks
  CHECK(chunk_cols({8, 4096, 64}) == "stream_avx2_M8N512");
  // A constant weight is packed once for such a plan (x86_backend.cpp): the packed path over it
  // runs faster (gemm_driver.cpp, prepacked_b_pays).
  Case c({8, 4096, 64}, rm, rm, EpiKind{}, 7101);
  auto plan = GemmPlan::make(c.problem(), Isa::avx2, 2, false, kZen3);
  REQUIRE(stream_rows_plan(*plan));
  CHECK(plan->prepacked_b_pays());
}

TEST_CASE("x86 gemm: the stream kernels over a few rows match the reference",
          "[x86][gemm][stream]") {
  if (!avx2_runs()) {
    std::printf("SKIPPED: this CPU runs no AVX2 kernels\n");
    return;
  }
  // Odd rows (an unpaired last row), N in several chunks with a column edge, or one chunk of a
  // few columns (B a narrow view of wide rows); K with remainders 0-3 past its passes of four.
  // (No N one past a multiple of 8, which edge_split takes.)
  // (Each over the small volume, 64^3, which takes the direct path.)
  const std::vector<Shape> shapes = {{2, 1024, 132}, {3, 1030, 101},  {5, 1100, 62},
                                     {8, 2051, 35},  {12, 1024, 70},  {11, 1500, 257},
                                     {7, 12, 4001},  {4, 12, 6002},   {9, 23, 1500},
                                     {6, 4096, 130}, {10, 1031, 103}, {2, 3000, 1000}};
  const Layout a_layouts[] = {Layout::row_major, Layout::transposed, Layout::padded};
  int variant = 0;
  for (const Shape& s : shapes) {
    for (int threads = 1; threads <= 3; ++threads) {
      const Layout la = a_layouts[variant % 3];
      const Layout lb = s.N < 1024 || variant % 2 ? Layout::wide_padded : Layout::row_major;
      EpiKind e = kEpilogueCycle[variant % 4];
      e.col_scale = variant % 5 == 4;
      INFO(s.M << "x" << s.N << "x" << s.K << " A " << layout_name(la) << " B " << layout_name(lb)
               << " epilogue " << variant % 4 << " col_scale " << e.col_scale << " threads "
               << threads);
      Case c(s, la, lb, e, uint32_t(7200 + variant));
      auto plan = GemmPlan::make(c.problem(), Isa::avx2, threads, false, kZen3);
      REQUIRE(stream_rows_plan(*plan));
      const GemmStats before = stats();
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      CHECK(stats().stream_calls > before.stream_calls);
      ++variant;
    }
  }
}
