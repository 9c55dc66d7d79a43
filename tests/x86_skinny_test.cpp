// The skinny path (skinny_path.cpp): C of a few rows computed from B's rows in place, against the
// double-accumulating reference on both ISAs: prefetching B's rows where B is out of L2, C split
// over the threads by column tiles, B's rows a page or more apart in K blocks, and kernels of
// several row blocks walking column tiles outer.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

TEST_CASE("x86 gemm: skinny kernels prefetch B's rows where B is out of L2", "[x86][gemm]") {
  // gemm_driver.cpp, kSkinnyPrefetchRows: rows at least 512 bytes apart and each thread's
  // columns of B over a quarter of L2. Plans for stated L2 sizes; every ISA's kernels generated,
  // the supported ones run.
  auto prefetches = [](Shape s, Layout lb, int64_t l2, Isa isa, bool run) {
    Case c(s, Layout::row_major, lb, EpiKind{Activation::gelu, true, false, true}, 9100);
    auto plan = GemmPlan::make(c.problem(), isa, 2, false, CacheSizes{l2});
    int with = 0, without = 0;
    for (const KernelInfo& k : plan->kernels()) {
      if (k.name.rfind("direct_", 0) != 0) continue;
      (k.name.find("_pf8") != std::string::npos ? with : without) += 1;
    }
    if (run) CHECK(worst_on_every_pool(*plan, c) <= 1.0);
    REQUIRE(with + without > 0);  // the skinny path
    return with > 0 && without == 0;
  };
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    INFO(isa_name(isa));
    CHECK(prefetches({8, 1000, 600}, Layout::row_major, 256 << 10, isa, false));
    CHECK(prefetches({3, 700, 900}, Layout::reversed_rows, 1 << 20, isa, false));
    CHECK_FALSE(prefetches({8, 1000, 600}, Layout::row_major, 8 << 20, isa, false));
    CHECK_FALSE(prefetches({8, 256, 256}, Layout::row_major, 2 << 20, isa, false));    // in L2
    CHECK_FALSE(prefetches({8, 100, 3000}, Layout::row_major, 64 << 10, isa, false));  // 400 B
    // Rows a page or more apart (kSkinnyPageApartKBlock) by the same rule.
    CHECK(prefetches({12, 2048, 600}, Layout::row_major, 1 << 20, isa, false));
    CHECK_FALSE(prefetches({8, 2048, 40}, Layout::row_major, 1 << 20, isa, false));
  }
  for (Isa isa : supported_isas()) {
    INFO(isa_name(isa));
    // Prefetched rows past B's end (the last 8 k-steps) and before its start (reversed rows)
    // are hints only; the results must not change.
    CHECK(prefetches({8, 1000, 600}, Layout::row_major, 256 << 10, isa, true));
    CHECK(prefetches({5, 333, 1100}, Layout::reversed_rows, 256 << 10, isa, true));
    CHECK(prefetches({7, 640, 700}, Layout::padded, 256 << 10, isa, true));
    CHECK(prefetches({10, 1100, 300}, Layout::reversed_rows, 256 << 10, isa, true));
  }
}

TEST_CASE("x86 gemm: skinny splits a C one column tile wide or more over the threads",
          "[x86][gemm]") {
  // skinny_path.cpp: one chunk per thread, each at least a column tile wide (4 tiles before, which
  // left 32x128x128 on one thread), from kSmallSplitMinFmas vector FMAs; in the small volume
  // where C's rows make one row block of the direct tiling. The chunks' widths from
  // the kernels' names (N of direct_<isa>_M<m>N<n>K...), every ISA's plans made, the supported
  // ones run on every pool.
  auto widths = [](Shape s, Isa isa, bool run, bool dynamic_m = false) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{Activation::relu, true, false, false},
           9150);
    GemmProblem p = c.problem();
    p.dynamic_m = dynamic_m;
    auto plan = GemmPlan::make(p, isa, 2, false, CacheSizes{2 << 20});
    std::set<int64_t> out;
    for (const KernelInfo& k : plan->kernels()) {
      REQUIRE(k.name.rfind("direct_", 0) == 0);
      const size_t n = k.name.find('N', k.name.find("_M"));
      out.insert(std::stoll(k.name.substr(n + 1)));
    }
    if (run) CHECK(worst_on_every_pool(*plan, c) <= 1.0);
    return out;
  };
  using W = std::set<int64_t>;
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    INFO(isa_name(isa));
    const bool run = isa_supported(isa);
    if (isa == Isa::avx512) {
      CHECK(widths({32, 128, 128}, isa, run) == W{64});
      CHECK(widths({32, 256, 128}, isa, run) == W{128});
      CHECK(widths({12, 128, 300}, isa, run) == W{64});
      CHECK(widths({32, 192, 192}, isa, run) == W{64, 128});
    } else {
      CHECK(widths({16, 64, 512}, isa, run) == W{32});
      CHECK(widths({12, 48, 700}, isa, run) == W{16, 32});
    }
    // Within the small volume, C's rows in one row block of the direct tiling: skinny's chunks
    // too (gemm_driver.cpp), not one direct kernel on one thread.
    CHECK(widths({2, 2048, 64}, isa, run) == W{1024});
    CHECK(widths({3, 1000, 80}, isa, run).size() == 2);
    // Under kSmallSplitMinFmas (skinny there with M symbolic): one chunk.
    CHECK(widths({2, 64, 40}, isa, run, true) == W{64});
    CHECK(widths({2, 128, 800}, isa, run, true) == W{64});
  }
}

TEST_CASE("x86 gemm: skinny path over B's rows a page or more apart, in K blocks of 32",
          "[x86][gemm]") {
  // gemm_driver.cpp, kSkinnyPageApartRows / kSkinnyPageApartKBlock: up to 12 rows of C, B's
  // rows at least 4096 bytes apart (N >= 1024 row-major, padded, reversed), K in ceil(K / 32)
  // blocks of at most 32 (the last one shorter); 13 rows stay packed. (12 rows: AVX-512's one
  // block of 14 x 2 vectors, AVX2's two of 6 x 2.)
  auto k_blocks = [](const GemmPlan& plan) {
    std::vector<int64_t> ks;
    for (const KernelInfo& k : plan.kernels()) {
      if (k.name.rfind("direct_", 0) != 0) continue;
      const size_t at = k.name.find('K');
      ks.push_back(std::stoll(k.name.substr(at + 1)));
    }
    return ks;
  };
  // (Each over the small volume, 64^3, which takes the direct path.) Planned for Intel's cores:
  // AVX2 on Zen cores takes the stream path over such rows (x86_stream_rows_test.cpp).
  const CacheSizes intel = intel_caches();
  const std::vector<Shape> shapes = {{2, 1024, 200}, {8, 1024, 33},  {5, 1100, 65},
                                     {12, 1024, 70}, {9, 1100, 400}, {6, 1030, 64},
                                     {8, 1100, 32},  {7, 2048, 97},  {4, 1500, 300}};
  const Layout layouts[] = {Layout::row_major, Layout::padded, Layout::reversed_rows};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (Layout lb : layouts) {
        const EpiKind e = kEpilogueCycle[variant % 4];
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " B " << layout_name(lb)
                           << " epilogue " << variant % 4);
        Case c(s, Layout::row_major, lb, e, uint32_t(9300 + variant));
        auto plan = GemmPlan::make(c.problem(), isa, 2, false, intel);
        const std::vector<int64_t> ks = k_blocks(*plan);
        REQUIRE(!ks.empty());  // the skinny path
        for (int64_t k : ks) CHECK(k <= 32);
        // K split evenly into ceil(K / 32) blocks.
        const int64_t nkb = (s.K + 31) / 32;
        CHECK(*std::max_element(ks.begin(), ks.end()) == (s.K + nkb - 1) / nkb);
        const GemmStats before = stats();
        CHECK(worst_on_every_pool(*plan, c) <= 1.0);
        CHECK(stats().skinny_calls > before.skinny_calls);
        ++variant;
      }
    }
    INFO(isa_name(isa));
    Case thirteen({13, 1024, 100}, Layout::row_major, Layout::row_major, EpiKind{}, 9399);
    CHECK(GemmPlan::make(thirteen.problem(), isa, 2, false, intel)
              ->kernels()
              .at(0)
              .name.rfind("packed_", 0) == 0);
    // Rows under a page apart keep the long K blocks (512) where C's rows take one row block
    // (6 rows on either ISA; see the next test for more).
    Case near({6, 1000, 1100}, Layout::row_major, Layout::row_major, EpiKind{}, 9398);
    const std::vector<int64_t> ks = k_blocks(*GemmPlan::make(near.problem(), isa, 2, false, intel));
    CHECK(std::find(ks.begin(), ks.end(), 367) != ks.end());
  }
}

TEST_CASE("x86 gemm: skinny kernels of several row blocks walk column tiles outer", "[x86][gemm]") {
  // gemm_driver.cpp, kSkinnyColsOuterKBlock: where C's rows take several row blocks of the direct
  // tiling (AVX-512: over 14 rows, AVX2: over 6) the skinny kernels walk column tiles outer
  // ("_co"), and where the thread's columns of B are over a quarter of L2, K comes in blocks of
  // at most 256 (rows a page apart keep their 32). Plans for a stated 2 MiB L2 on either ISA.
  struct Plan {
    bool cols_outer = true, any = false;
    int64_t k_max = 0;
  };
  auto plan_of = [](Shape s, Isa isa) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 9500);
    Plan out;
    for (const KernelInfo& k :
         GemmPlan::make(c.problem(), isa, 2, false, CacheSizes{2 << 20})->kernels()) {
      if (k.name.rfind("direct_", 0) != 0) continue;
      out.any = true;
      out.cols_outer &= k.name.find("_co") != std::string::npos;
      out.k_max = std::max<int64_t>(out.k_max, std::stoll(k.name.substr(k.name.find('K') + 1)));
    }
    REQUIRE(out.any);  // the skinny path
    return out;
  };
  Plan p = plan_of({16, 768, 3072}, Isa::avx512);
  CHECK((p.cols_outer && p.k_max == 256));
  p = plan_of({28, 768, 512}, Isa::avx512);
  CHECK((p.cols_outer && p.k_max == 256));
  p = plan_of({24, 300, 300}, Isa::avx512);  // B in L2: one K block
  CHECK((p.cols_outer && p.k_max == 300));
  p = plan_of({14, 768, 3072}, Isa::avx512);  // one block of 14 x 2
  CHECK((!p.cols_outer && p.k_max == 512));
  p = plan_of({8, 1000, 1100}, Isa::avx2);
  CHECK((p.cols_outer && p.k_max == 220));
  p = plan_of({6, 1000, 1100}, Isa::avx2);
  CHECK((!p.cols_outer && p.k_max == 367));
  p = plan_of({12, 2048, 600}, Isa::avx2);  // B's rows a page apart
  CHECK((p.cols_outer && p.k_max <= 32));

  // Results: full column tiles only, and full tiles and an edge tile (an edge tile only below);
  // one, two and several K blocks; B padded and reversed; every epilogue kind; 1-3 threads and
  // inline.
  const std::vector<Shape> shapes = {{16, 768, 600}, {28, 700, 300},  {17, 1000, 1100},
                                     {30, 512, 130}, {20, 300, 1000}, {32, 333, 257},
                                     {15, 640, 33},  {9, 900, 700},   {12, 1100, 90}};
  const Layout layouts[] = {Layout::row_major, Layout::padded, Layout::reversed_rows};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      if (isa == Isa::avx2 && s.M > 16) continue;  // packed there
      const Layout lb = layouts[variant % 3];
      const EpiKind e = kEpilogueCycle[variant % 4];
      INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " B " << layout_name(lb)
                         << " epilogue " << variant % 4);
      Case c(s, variant % 2 ? Layout::padded : Layout::row_major, lb, e, uint32_t(9600 + variant));
      // (Intel's rules: on Zen cores AVX2 takes the stream path where B's rows are a page apart.)
      auto plan = GemmPlan::make(c.problem(), isa, 2, false, intel_caches());
      bool cols_outer = false;
      for (const KernelInfo& k : plan->kernels())
        cols_outer |= k.name.rfind("direct_", 0) == 0 && k.name.find("_co") != std::string::npos;
      CHECK(cols_outer == (s.M > (isa == Isa::avx512 ? 14 : 6)));
      const GemmStats before = stats();
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      CHECK(stats().skinny_calls > before.skinny_calls);
      ++variant;
    }
    // A last chunk narrower than one column tile (an edge tile only): planned for 4 threads,
    // 20x810: three chunks of 256 and one of 42 (AVX-512: 9 x 3 tiles of 48 columns); 16x204:
    // three of 64 and one of 12 (AVX2: 6 x 2 tiles of 16).
    const Shape narrow = isa == Isa::avx512 ? Shape{20, 810, 300} : Shape{16, 204, 600};
    INFO(isa_name(isa) << " " << narrow.M << "x" << narrow.N << "x" << narrow.K);
    Case c(narrow, Layout::row_major, Layout::padded, kEpilogueCycle[1], 9699);
    auto plan = GemmPlan::make(c.problem(), isa, 4, false, CacheSizes{2 << 20});
    int last_chunk_kernels = 0;
    for (const KernelInfo& k : plan->kernels())
      last_chunk_kernels +=
          k.name.find(isa == Isa::avx512 ? "N42K" : "N12K") != std::string::npos &&
          k.name.find("_co") != std::string::npos;
    CHECK(last_chunk_kernels > 0);
    const GemmStats before = stats();
    CHECK(worst_on_every_pool(*plan, c) <= 1.0);
    CHECK(stats().skinny_calls > before.skinny_calls);
  }
}
