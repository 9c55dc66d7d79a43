// GEMV-like problems read along the rows of their large operand (dot_path.cpp, dot_kernel.cpp):
// x @ W.T (up to 8 rows of A, B's rows unit-stride along K), A @ b for one column b; and A.T @ b,
// a one-column C run on the stream path as its transpose (gemm_driver.cpp, column_as_row). Each
// against the reference over K's vector tails, output groups of 1-8, chunks and L2 blocks,
// strided and reversed operands, every epilogue (the N = 1 bias one value for every row), plans
// for 1-4 threads run on pools of 1-3 and none. Which problems take the dot path:
// x86_dot_routing_test.cpp; the dot kernels' code and their aligned loads: x86_dot_kernel_test.cpp.
#include "x86_dot_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm_plan.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <set>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

TEST_CASE("x86 gemm: x @ W.T on the dot path matches the reference", "[x86][gemm][dot]") {
  // K: under one vector, vector tails of 1-7 (and 1-15 on AVX-512), exact unrolls, long; N: one
  // output, partial groups, several groups and chunks.
  const std::vector<int64_t> ks = {1, 5, 8, 13, 16, 31, 32, 33, 100, 1000};
  const std::vector<int64_t> ns = {1, 7, 8, 9, 17, 100, 333};
  // M: up to four rows of A per kernel call on AVX-512 (two on AVX2), the rows left by another;
  // 9-16 rows on AVX-512, and from 128 columns 17-32 (AVX2 9-16), from K = 8 M (the others on
  // the direct or packed path).
  const std::vector<int64_t> ms = {1, 2, 3, 5, 8, 9, 16, 23, 32};
  const Layout a_layouts[] = {Layout::row_major, Layout::strided, Layout::transposed,
                              Layout::reversed_rows, Layout::padded};
  const Layout b_layouts[] = {Layout::transposed, Layout::transposed_padded};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (int64_t M : ms) {
      for (int64_t N : ns) {
        for (int64_t K : ks) {
          const Layout la = a_layouts[variant % 5];
          // With K = 1 a transposed B is also row-major (the stream path's).
          const Layout lb = K == 1 ? Layout::transposed_padded : b_layouts[variant / 5 % 2];
          const EpiKind e = kEpilogueCycle[variant % 4];
          const int threads = 1 + variant % 4;
          Case c({M, N, K}, la, lb, e, uint32_t(4100 + variant));
          INFO(isa_name(isa) << " " << M << "x" << N << "x" << K << " A " << layout_name(la)
                             << " B " << layout_name(lb) << " epilogue " << variant % 4
                             << " threads " << threads);
          CHECK(check_case(c, isa, threads, "dot") <= 1.0);
          ++variant;
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: x @ W.T over several L2 blocks and chunks", "[x86][gemm][dot]") {
  // A 16 KiB L2: blocks of 8 rows of X at K = 1000 (the smallest block), each read by every row
  // of A; 2-4 chunks; the last block partial.
  const CacheSizes small_l2{16 * 1024};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (Shape s : std::vector<Shape>{{2, 203, 1000}, {5, 64, 777}, {8, 1001, 300}, {3, 40, 129}}) {
      for (int threads : {2, 3, 4}) {
        const EpiKind e = kEpilogueCycle[variant % 4];
        Case c(s, Layout::padded, Layout::transposed_padded, e, uint32_t(4300 + variant));
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads " << threads
                           << " epilogue " << variant % 4);
        CHECK(check_case(c, isa, threads, "dot", &small_l2) <= 1.0);
        ++variant;
      }
    }
  }
}

TEST_CASE("x86 gemm: with several passes over X, the dot path blocks X in L1 where 8 rows fit",
          "[x86][gemm][dot]") {
  // dot_path.cpp (plan_dot): a 48 KiB L1 and 1 MiB L2. The rows of X a kernel walks (its
  // name's N) per block: 8 rows of X in half of L1 at K = 554 (2216 bytes a row), the rest of
  // them in the last block's kernel; at K = 1000 8 rows do not fit, so blocks of half of L2 (all
  // 45 rows); one pass (up to four vectors on AVX-512) needs no block.
  const CacheSizes caches{1024 * 1024, 12, 4096};
  auto block_rows = [&](Shape s, Layout lb, Isa isa) {
    Case c(s, Layout::row_major, lb, EpiKind{}, 4450);
    std::vector<std::string> names;
    for (const KernelInfo& k : GemmPlan::make(c.problem(), isa, 1, false, caches)->kernels())
      names.push_back(k.name.substr(0, k.name.find('K')));
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  };
  using Names = std::vector<std::string>;
  // A @ B with 2-4 columns of B: AVX2 two a pass, AVX-512 one pass for all.
  CHECK(block_rows({45, 4, 554}, Layout::row_major, Isa::avx2) ==
        Names{"dot_avx2_N5", "dot_avx2_N8"});
  CHECK(block_rows({45, 3, 554}, Layout::row_major, Isa::avx2) ==
        Names{"dot_avx2_N5", "dot_avx2_N8"});
  CHECK(block_rows({45, 4, 1000}, Layout::row_major, Isa::avx2) == Names{"dot_avx2_N45"});
  CHECK(block_rows({45, 2, 554}, Layout::row_major, Isa::avx2) == Names{"dot_avx2_N45"});
  CHECK(block_rows({45, 4, 554}, Layout::row_major, Isa::avx512) == Names{"dot_avx512_N45"});
  CHECK(block_rows({45, 3, 554}, Layout::row_major, Isa::avx512) == Names{"dot_avx512_N45"});
  // x @ W.T: 8 and 6 rows of A over 100 rows of W (AVX-512: two passes, the second of four or
  // two rows); 4 rows in one pass.
  CHECK(block_rows({8, 100, 554}, Layout::transposed, Isa::avx512) ==
        Names{"dot_avx512_N4", "dot_avx512_N8"});
  CHECK(block_rows({6, 100, 554}, Layout::transposed, Isa::avx512) ==
        Names{"dot_avx512_N4", "dot_avx512_N8"});
  CHECK(block_rows({4, 100, 554}, Layout::transposed, Isa::avx512) == Names{"dot_avx512_N100"});
  CHECK(block_rows({4, 100, 554}, Layout::transposed, Isa::avx2) ==
        Names{"dot_avx2_N4", "dot_avx2_N8"});
  CHECK(block_rows({2, 100, 554}, Layout::transposed, Isa::avx2) == Names{"dot_avx2_N100"});
  // Each against the reference on the ISAs this CPU runs.
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (Shape s : std::vector<Shape>{{45, 4, 554},
                                      {45, 3, 554},
                                      {8, 100, 554},
                                      {6, 100, 554},
                                      {4, 100, 554},
                                      {3, 21, 300}}) {
      const bool xwt = s.N > 4;
      Case c(s, variant % 2 ? Layout::padded : Layout::row_major,
             xwt ? Layout::transposed : Layout::row_major, kEpilogueCycle[variant % 4],
             uint32_t(4460 + variant));
      INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K);
      CHECK(worst_on_every_pool(*GemmPlan::make(c.problem(), isa, 2, false, caches), c) <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: a one-column C on the dot and stream paths matches the reference",
          "[x86][gemm][dot]") {
  // A @ b: A's rows along K (forward, padded, reversed); b contiguous or strided (copied).
  const std::vector<Shape> dot_shapes = {{1, 1, 1},     {1, 1, 777},    {2, 1, 9},
                                         {7, 1, 16},    {9, 1, 33},     {63, 1, 5},
                                         {100, 1, 100}, {1000, 1, 300}, {4099, 1, 64}};
  const Layout a_rows[] = {Layout::row_major, Layout::padded, Layout::reversed_rows};
  const Layout b_col[] = {Layout::row_major, Layout::strided, Layout::broadcast_row};
  // A.T @ b: A's columns unit-stride, above the stream path's threshold.
  const std::vector<Shape> stream_shapes = {
      {1024, 1, 64}, {2000, 1, 333}, {70000, 1, 3}, {4096, 1, 1024}, {333, 1, 4099}};
  const Layout a_cols[] = {Layout::transposed, Layout::transposed_padded};
  int variant = 0;
  // Each shape on each thread count, layouts and epilogue cycling with the variant.
  auto sweep = [&](Isa isa, const std::vector<Shape>& shapes, std::span<const Layout> las,
                   std::span<const Layout> lbs, std::initializer_list<int> thread_counts,
                   const char* path) {
    for (const Shape& s : shapes) {
      for (int threads : thread_counts) {
        const Layout la = las[size_t(variant) % las.size()],
                     lb = lbs[size_t(variant) / las.size() % lbs.size()];
        const EpiKind e = kEpilogueCycle[variant % 4];
        Case c(s, la, lb, e, uint32_t(4500 + variant), 0);
        INFO(isa_name(isa) << " " << path << " " << s.M << "x1x" << s.K << " A " << layout_name(la)
                           << " b " << layout_name(lb) << " epilogue " << variant % 4 << " threads "
                           << threads);
        CHECK(check_case(c, isa, threads, path) <= 1.0);
        ++variant;
      }
    }
  };
  for (Isa isa : supported_isas()) {
    sweep(isa, dot_shapes, a_rows, b_col, {1, 2, 4}, "dot");
    sweep(isa, stream_shapes, a_cols, std::span<const Layout>(b_col, 2), {1, 2, 3}, "stream");
  }
}

TEST_CASE("x86 gemm: A @ B with 1-4 columns on the dot path matches the reference",
          "[x86][gemm][dot]") {
  // Outputs down C's columns a row apart (C and the residual padded), B's columns copied
  // (row-major, transposed, strided, one row broadcast), A forward, padded or reversed; groups of
  // 1-8 rows, K's tails, every epilogue (bias[j] for all of column j), 1-4 threads, and a 16 KiB
  // L2 for blocks of 8 rows of A read by every column.
  const std::vector<int64_t> ms = {8, 9, 17, 100, 1001};
  const std::vector<int64_t> ks = {1, 7, 8, 33, 50, 300};
  const Layout a_layouts[] = {Layout::row_major, Layout::padded, Layout::reversed_rows};
  const Layout b_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::broadcast_row};
  const CacheSizes small_l2{16 * 1024};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (int64_t M : ms) {
      for (int64_t N : {1, 2, 3, 4}) {
        for (int64_t K : ks) {
          const Layout la = a_layouts[variant % 3], lb = b_layouts[variant / 3 % 4];
          const EpiKind e = kEpilogueCycle[variant % 4];
          const int threads = 1 + variant % 4;
          Case c({M, N, K}, la, lb, e, uint32_t(4900 + variant));
          INFO(isa_name(isa) << " " << M << "x" << N << "x" << K << " A " << layout_name(la)
                             << " B " << layout_name(lb) << " epilogue " << variant % 4
                             << " threads " << threads);
          CHECK(check_case(c, isa, threads, "dot", variant % 2 ? &small_l2 : nullptr) <= 1.0);
          ++variant;
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: x @ W.T takes up to four rows of A per pass on AVX-512, and what pays packing",
          "[x86][gemm][dot]") {
  // dot_path.cpp (plan_dot): plans made on any host (only running needs the ISA). AVX-512
  // kernels with up to four vectors ("_v<n>a" and A's row stride), AVX2 with up to two, and a
  // kernel for the rows left after those passes.
  auto vectors = [](Shape s, Layout la, Isa isa) {
    Case c(s, la, Layout::transposed, EpiKind{}, 4400);
    std::set<int> out;
    for (const KernelInfo& k : GemmPlan::make(c.problem(), isa, 2)->kernels()) {
      REQUIRE(k.name.rfind("dot_", 0) == 0);
      const size_t v = k.name.find("_v");
      out.insert(v == std::string::npos ? 1 : k.name[v + 2] - '0');
    }
    return out;
  };
  using Vecs = std::set<int>;
  CHECK(vectors({2, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{2});
  CHECK(vectors({3, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{3});
  CHECK(vectors({4, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{4});
  CHECK(vectors({5, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{1, 4});
  CHECK(vectors({7, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{3, 4});
  CHECK(vectors({8, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{4});
  CHECK(vectors({1, 1000, 512}, Layout::row_major, Isa::avx512) == Vecs{1});
  CHECK(vectors({8, 1000, 512}, Layout::row_major, Isa::avx2) == Vecs{2});
  CHECK(vectors({5, 1000, 512}, Layout::row_major, Isa::avx2) == Vecs{1, 2});
  CHECK(vectors({1, 1000, 512}, Layout::row_major, Isa::avx2) == Vecs{1});
  // A copied K apart where its columns are not unit-stride: the second row at K.
  {
    Case c({2, 100, 300}, Layout::transposed, Layout::transposed, EpiKind{}, 4401);
    CHECK(GemmPlan::make(c.problem(), Isa::avx512, 2)->kernels().at(0).name.find("_v2a300") !=
          std::string::npos);
  }
  // A constant W is worth packing once (GemmPlan::prepacked_b_pays) from 3 rows and 128
  // columns with several rows a pass (AVX-512 and AVX2); from 64 columns with one.
  auto pays = [](Shape s, Isa isa) {
    Case c(s, Layout::row_major, Layout::transposed, EpiKind{}, 4402);
    return GemmPlan::make(c.problem(), isa, 2)->prepacked_b_pays();
  };
  CHECK_FALSE(pays({2, 4096, 4096}, Isa::avx512));
  CHECK_FALSE(pays({8, 64, 4096}, Isa::avx512));
  CHECK_FALSE(pays({1, 4096, 4096}, Isa::avx512));
  CHECK(pays({3, 1024, 1024}, Isa::avx512));
  CHECK(pays({8, 128, 4096}, Isa::avx512));
  CHECK_FALSE(pays({2, 4096, 4096}, Isa::avx2));
  CHECK_FALSE(pays({8, 64, 4096}, Isa::avx2));
  CHECK(pays({3, 1024, 1024}, Isa::avx2));
  // Two to four rows a pass (and the rows left: 5 = 4 + 1, 6 = 4 + 2, 7 = 4 + 3, 11 = 4 + 4 +
  // 3) with every epilogue, one residual row for all (ld_residual 0) and strided ones, and C's
  // rows padded, where the CPU runs AVX-512.
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; dot kernels of 2-4 rows not run\n");
    return;
  }
  int variant = 0;
  for (Shape s : std::vector<Shape>{{2, 9, 17},
                                    {3, 8, 33},
                                    {4, 100, 1000},
                                    {5, 17, 100},
                                    {7, 33, 64},
                                    {6, 1000, 25},
                                    {11, 40, 300},
                                    {16, 21, 211}}) {
    for (int e = 0; e < 4; ++e) {
      Case c(s, variant % 2 ? Layout::padded : Layout::reversed_rows, Layout::transposed_padded,
             kEpilogueCycle[e], uint32_t(4500 + variant), 5);
      if (variant % 3 == 0) c.broadcast_residual_row();
      INFO(s.M << "x" << s.N << "x" << s.K << " epilogue " << e);
      CHECK(check_case(c, Isa::avx512, 2, "dot") <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: the dot path with one residual row for every row of C (ld_residual 0)",
          "[x86][gemm][dot]") {
  // A @ B with 1-4 columns: the residual's elements are gathered (a stride of 0 included).
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (int64_t M : {8, 13, 100}) {
      for (int64_t N : {1, 2, 4}) {
        for (int64_t K : {1, 9, 65, 300}) {
          Case c({M, N, K}, Layout::row_major, Layout::row_major,
                 EpiKind{Activation::relu, true, false, true}, uint32_t(5300 + variant++));
          c.broadcast_residual_row();
          INFO(isa_name(isa) << " " << M << "x" << N << "x" << K);
          CHECK(check_case(c, isa, 2, "dot") <= 1.0);
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: A @ B with 2-4 columns takes them all in one pass on AVX-512",
          "[x86][gemm][dot]") {
  // dot_path.cpp (plan_dot over A's rows): kernels with 2-4 vectors ("_v<n>a" and the distance
  // between B's columns as the kernel reads them: K where they are copied, B's column stride
  // where they are runs); AVX2 two a pass.
  auto names = [](Shape s, Layout lb, Isa isa) {
    Case c(s, Layout::row_major, lb, EpiKind{}, 4600);
    std::vector<std::string> out;
    for (const KernelInfo& k : GemmPlan::make(c.problem(), isa, 2)->kernels()) {
      REQUIRE(k.name.rfind("dot_", 0) == 0);
      out.push_back(k.name);
    }
    return out;
  };
  auto count = [](const std::vector<std::string>& ks, const std::string& part) {
    return std::count_if(ks.begin(), ks.end(),
                         [&](const std::string& k) { return k.find(part) != std::string::npos; });
  };
  const auto two = names({1000, 2, 512}, Layout::row_major, Isa::avx512);
  CHECK(count(two, "_v2a512") == int64_t(two.size()));
  const auto three = names({1000, 3, 512}, Layout::row_major, Isa::avx512);
  CHECK(count(three, "_v3a512") == int64_t(three.size()));
  const auto runs = names({1000, 4, 300}, Layout::transposed_padded, Isa::avx512);
  CHECK(count(runs, "_v4a300") == 0);  // padded: B's columns further apart than K
  CHECK(count(runs, "_v4a") == int64_t(runs.size()));
  // Columns of B far apart (read in place, B's rows unit-stride along K): the kernel addresses
  // its last vector with a 32-bit displacement, so fewer vectors a pass where they would not
  // reach (plans only: nothing is allocated or run).
  auto vectors_at = [](int64_t col_stride) {
    GemmProblem p;
    p.M = 100, p.N = 4, p.K = 64;
    p.a = {nullptr, 64, 1};
    p.b = {nullptr, 1, col_stride};
    p.ldc = 4;
    std::set<int> out;
    for (const KernelInfo& k : GemmPlan::make(p, Isa::avx512, 2)->kernels()) {
      const size_t v = k.name.find("_v");
      out.insert(v == std::string::npos ? 1 : k.name[v + 2] - '0');
      if (v != std::string::npos)
        CHECK(k.name.substr(v + 4) == std::to_string(col_stride));  // "_v<n>a<stride>"
    }
    return out;
  };
  CHECK(vectors_at(100'000'000) == std::set<int>{4});
  CHECK(vectors_at(200'000'000) == std::set<int>{1, 3});
  CHECK(vectors_at(300'000'000) == std::set<int>{2});
  CHECK(vectors_at(600'000'000) == std::set<int>{1});
  const auto avx2 = names({1000, 4, 512}, Layout::row_major, Isa::avx2);
  CHECK(count(avx2, "_v2a512") == int64_t(avx2.size()));
  const auto avx2_three = names({1000, 3, 512}, Layout::row_major, Isa::avx2);
  CHECK(count(avx2_three, "_v2a512") > 0);
  CHECK(count(avx2_three, "_v") < int64_t(avx2_three.size()));
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; dot kernels of 2-4 columns not run\n");
    return;
  }
  // Every epilogue (each column its own bias value), one residual row for all and strided
  // ones, C's rows padded, B's columns copied or read in place.
  const Layout b_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::transposed_padded};
  int variant = 0;
  for (Shape s : std::vector<Shape>{
           {8, 2, 65}, {100, 4, 1000}, {33, 3, 64}, {1000, 2, 21}, {45, 4, 554}, {8, 4, 64}}) {
    for (int e = 0; e < 4; ++e) {
      Case c(s, variant % 2 ? Layout::padded : Layout::reversed_rows, b_layouts[variant % 4],
             kEpilogueCycle[e], uint32_t(4700 + variant), 5);
      if (variant % 3 == 0) c.broadcast_residual_row();
      INFO(s.M << "x" << s.N << "x" << s.K << " epilogue " << e << " B "
               << layout_name(b_layouts[variant % 4]));
      CHECK(check_case(c, Isa::avx512, 1 + variant % 3, "dot") <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: A @ B with 5-8 columns and many rows takes the dot path on AVX-512",
          "[x86][gemm][dot]") {
  // dot_path.cpp (kDotMaxColsWide): from 256 rows, K 128-1024, A up to 8 MiB; four columns a
  // pass, the rest ("_v<N-4>a") in a second. Plans made on any host.
  auto dot_vectors = [](Shape s, Isa isa) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 4800);
    std::set<std::string> out;
    for (const KernelInfo& k : GemmPlan::make(c.problem(), isa, 2)->kernels()) {
      if (k.name.rfind("dot_", 0) != 0) return std::set<std::string>{};
      const size_t v = k.name.find("_v");
      out.insert(v == std::string::npos ? "v1" : k.name.substr(v + 1, 2));
    }
    return out;
  };
  using Vs = std::set<std::string>;
  CHECK(dot_vectors({1000, 8, 512}, Isa::avx512) == Vs{"v4"});
  CHECK(dot_vectors({256, 5, 128}, Isa::avx512) == Vs{"v1", "v4"});
  CHECK(dot_vectors({300, 7, 1024}, Isa::avx512) == Vs{"v3", "v4"});
  CHECK(dot_vectors({2048, 6, 1024}, Isa::avx512) == Vs{"v2", "v4"});  // A of 8 MiB
  CHECK(dot_vectors({255, 8, 512}, Isa::avx512).empty());
  CHECK(dot_vectors({1000, 8, 127}, Isa::avx512).empty());
  CHECK(dot_vectors({1000, 8, 1025}, Isa::avx512).empty());
  CHECK(dot_vectors({2049, 8, 1024}, Isa::avx512).empty());  // A over 8 MiB
  CHECK(dot_vectors({1000, 9, 512}, Isa::avx512).empty());
  CHECK(dot_vectors({1000, 8, 512}, Isa::avx2).empty());
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; dot kernels of 5-8 columns not run\n");
    return;
  }
  // Every epilogue, B's columns copied or read in place, A padded or reversed, C's rows padded,
  // one residual row for all, 1-3 threads, and a 16 KiB L2 (blocks of few rows of A).
  const Layout b_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::transposed_padded, Layout::broadcast_row};
  const CacheSizes small_l2{16 * 1024};
  int variant = 0;
  for (Shape s : std::vector<Shape>{
           {256, 5, 128}, {300, 7, 300}, {1001, 8, 1024}, {257, 6, 200}, {512, 8, 129}}) {
    for (int e = 0; e < 4; ++e) {
      EpiKind epi = kEpilogueCycle[e];
      epi.col_scale = variant % 3 == 1;
      Case c(s, variant % 2 ? Layout::padded : Layout::reversed_rows, b_layouts[variant % 5], epi,
             uint32_t(4850 + variant), 5);
      if (variant % 3 == 0) c.broadcast_residual_row();
      INFO(s.M << "x" << s.N << "x" << s.K << " epilogue " << e << " B "
               << layout_name(b_layouts[variant % 5]) << " variant " << variant);
      CHECK(check_case(c, Isa::avx512, 1 + variant % 3, "dot", variant % 2 ? &small_l2 : nullptr) <=
            1.0);
      ++variant;
    }
  }
}
