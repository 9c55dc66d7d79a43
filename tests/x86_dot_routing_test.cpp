// Which GEMV-like problems take the dot path (dot_path.cpp's dot_path_for) and which do not: rows
// of A read along rows on each kind of core (Intel, Zen with 256-bit ops whole, cores that split
// them), the K under which the direct kernels pay more, and a symbolic M over a bounded set of
// kernels. The dot kernels' results are checked in x86_dot_test.cpp.
#include "x86_dot_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"

#include <set>
#include <cstdio>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

// Whether x @ W.T of shape s (A row-major, W's rows along K) takes the dot path over B's rows
// on a machine of `caches`.
bool takes_b_rows(Shape s, Isa isa, const CacheSizes& caches) {
  Case c(s, Layout::row_major, Layout::transposed, EpiKind{}, 4051, 0);
  return dot_path_for(c.problem(), isa, false, caches) == DotOver::b_rows;
}

// The path (its first kernel's name up to '_') of a 2-thread plan for x @ W.T of shape s on a
// machine of `caches`.
std::string x_wt_path(Shape s, Isa isa, const CacheSizes& caches) {
  Case c(s, Layout::row_major, Layout::transposed, EpiKind{}, 4060, 0);
  const std::string name = GemmPlan::make(c.problem(), isa, 2, false, caches)->kernels().at(0).name;
  return name.substr(0, name.find('_'));
}

}  // namespace

TEST_CASE("x86 gemm: GEMV-like layouts read along rows take the dot or stream path",
          "[x86][gemm][dot]") {
  // Planned for a 2 MiB L2 whatever the host's: the paths below the dot and stream paths depend
  // on it (direct_rows takes B up to a fifth of L2 on AVX2; 9x127x512 x @ W.T packs on 512 KiB).
  const CacheSizes two_mib{2 << 20};
  for (Isa isa : supported_isas()) {
    auto path_of = [&](Shape s, Layout la, Layout lb, int64_t c_pad) {
      Case c(s, la, lb, EpiKind{}, 1, c_pad);
      return path_taken(*GemmPlan::make(c.problem(), isa, 2, false, two_mib), c, pool2());
    };
    INFO(isa_name(isa));
    // x @ W.T: M = 1 and up to 8 rows, 16 on AVX-512; from 128 columns 16 on AVX2 and 32 on
    // AVX-512 (before: packed, B packed on every call; small: direct with B copied), in or
    // above the small volume.
    const bool avx512 = isa == Isa::avx512;
    CHECK(path_of({1, 4096, 1024}, Layout::row_major, Layout::transposed, 3) == "dot");
    CHECK(path_of({1, 64, 64}, Layout::row_major, Layout::transposed, 3) == "dot");
    CHECK(path_of({8, 1000, 512}, Layout::row_major, Layout::transposed, 3) == "dot");
    CHECK(path_of({9, 1000, 512}, Layout::row_major, Layout::transposed, 3) == "dot");
    CHECK(path_of({9, 127, 512}, Layout::row_major, Layout::transposed, 3) ==
          (avx512 ? "dot" : "direct"));
    CHECK(path_of({16, 128, 512}, Layout::row_major, Layout::transposed, 3) == "dot");
    CHECK(path_of({17, 1000, 512}, Layout::row_major, Layout::transposed, 3) ==
          (avx512 ? "dot" : "packed"));
    CHECK((path_of({32, 128, 512}, Layout::row_major, Layout::transposed, 3) == "dot") == avx512);
    CHECK(path_of({17, 127, 512}, Layout::row_major, Layout::transposed, 3) != "dot");
    CHECK(path_of({33, 1000, 512}, Layout::row_major, Layout::transposed, 3) == "packed");
    // One output column with C's rows apart: B's one row along K (its column stride unused).
    CHECK(path_of({4, 1, 1024}, Layout::row_major, Layout::transposed, 3) == "dot");
    // A @ b (N = 1): A's rows along K, C one contiguous column.
    CHECK(path_of({4096, 1, 1024}, Layout::row_major, Layout::row_major, 0) == "dot");
    CHECK(path_of({64, 1, 64}, Layout::row_major, Layout::row_major, 0) == "dot");
    // A.T @ b (N = 1, A's columns unit-stride): the transpose on the stream path, above the small
    // volume or with 64 Ki elements of A.
    CHECK(path_of({4096, 1, 1024}, Layout::transposed, Layout::row_major, 0) == "stream");
    CHECK(path_of({1024, 1, 64}, Layout::transposed, Layout::row_major, 0) == "stream");
    CHECK(path_of({64, 1, 64}, Layout::transposed, Layout::row_major, 0) == "direct");
    // A @ B with up to 4 columns and at least 8 rows, C's rows apart (outputs stored one lane at
    // a time down each column); A.T @ b with C's rows apart stays off the stream path.
    CHECK(path_of({4096, 1, 1024}, Layout::row_major, Layout::row_major, 3) == "dot");
    CHECK(path_of({4096, 4, 1024}, Layout::row_major, Layout::row_major, 3) == "dot");
    CHECK(path_of({8, 2, 64}, Layout::row_major, Layout::row_major, 3) == "dot");
    CHECK(path_of({4096, 5, 1024}, Layout::row_major, Layout::row_major, 3) != "dot");
    CHECK(path_of({7, 4, 1024}, Layout::row_major, Layout::row_major, 3) != "dot");
    CHECK(path_of({4096, 1, 1024}, Layout::transposed, Layout::row_major, 3) != "stream");
  }
}

TEST_CASE("x86 gemm: on cores that split 256-bit ops, x @ W.T takes the dot path from K = 10 M",
          "[x86][gemm][dot]") {
  // dot_path.cpp (dot_min_k_b_rows): measured on an AMD EPYC Zen 1, AVX2 only; 2 and 3 rows from
  // K = 6 M, one row at any K. AVX-512 keeps its rule. The rule is checked for both ISAs whatever
  // the host runs.
  CacheSizes split;
  split.split_256 = true;
  const CacheSizes whole = CacheSizes{};
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    const bool avx512 = isa == Isa::avx512;
    INFO(isa_name(isa));
    CHECK(takes_b_rows({5, 462, 24}, isa, split) == avx512);  // AVX-512 from 4 M
    CHECK(takes_b_rows({5, 462, 24}, isa, whole));
    CHECK(takes_b_rows({8, 1000, 79}, isa, split) == avx512);
    CHECK(takes_b_rows({8, 1000, 80}, isa, split));
    CHECK(takes_b_rows({4, 1000, 39}, isa, split) == avx512);
    CHECK(takes_b_rows({4, 1000, 40}, isa, split));
    CHECK(takes_b_rows({3, 1000, 17}, isa, split) == avx512);
    CHECK(takes_b_rows({3, 1000, 18}, isa, split));
    CHECK(takes_b_rows({2, 1000, 11}, isa, split) == avx512);
    CHECK(takes_b_rows({2, 1000, 12}, isa, split));
    CHECK(takes_b_rows({1, 1000, 2}, isa, split));
  }
  // The plans take the direct kernels instead, and run.
  if (isa_supported(Isa::avx2)) {
    for (Shape s : {Shape{5, 462, 11}, Shape{3, 1000, 17}}) {
      Case c(s, Layout::row_major, Layout::transposed, EpiKind{}, 4052, 0);
      CHECK(check_case(c, Isa::avx2, 2, "direct", &split) <= 1.0);
    }
  }
}

TEST_CASE(
    "x86 gemm: on Zen cores that run 256-bit ops whole, x @ W.T takes the dot path from "
    "K = 4 M",
    "[x86][gemm][dot]") {
  // dot_path.cpp (dot_min_k_b_rows): measured on an AMD EPYC Zen 3, AVX2 only; one row from K =
  // 6. Intel's cores keep K = M, AVX-512 its own rule, past 8 rows 8 M. Checked for both ISAs
  // whatever the host runs.
  CacheSizes zen;
  zen.amd_zen = true;
  const CacheSizes intel = CacheSizes{};
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    const bool avx512 = isa == Isa::avx512;
    INFO(isa_name(isa));
    // (AVX-512 from 4 M, or 2 M under 4 rows.)
    CHECK_FALSE(takes_b_rows({5, 462, 11}, isa, zen));
    CHECK(takes_b_rows({5, 462, 11}, isa, intel) == !avx512);
    CHECK_FALSE(takes_b_rows({5, 462, 19}, isa, zen));
    CHECK(takes_b_rows({5, 462, 20}, isa, zen));
    CHECK_FALSE(takes_b_rows({8, 1000, 31}, isa, zen));
    CHECK(takes_b_rows({8, 1000, 32}, isa, zen));
    CHECK(takes_b_rows({2, 1000, 7}, isa, zen) == avx512);
    CHECK(takes_b_rows({2, 1000, 8}, isa, zen));
    CHECK(takes_b_rows({1, 1000, 5}, isa, zen) == avx512);
    CHECK(takes_b_rows({1, 1000, 6}, isa, zen));
    CHECK_FALSE(takes_b_rows({16, 1000, 127}, isa, zen));
    CHECK(takes_b_rows({16, 1000, 128}, isa, zen));
  }
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2; x @ W.T's plans for a Zen not run\n");
    return;
  }
  // The plans take the direct kernels below the bound, the dot path from it, and run: A's rows
  // padded or transposed, W's rows padded, every epilogue.
  int variant = 0;
  for (const auto& [s, path] : std::vector<std::pair<Shape, const char*>>{{{5, 462, 11}, "direct"},
                                                                          {{2, 1000, 7}, "direct"},
                                                                          {{1, 300, 5}, "direct"},
                                                                          {{3, 301, 12}, "dot"},
                                                                          {{1, 300, 6}, "dot"}}) {
    Case c(s, variant % 2 ? Layout::padded : Layout::transposed, Layout::transposed_padded,
           kEpilogueCycle[variant % 4], uint32_t(4054 + variant), 5);
    INFO(s.M << "x" << s.N << "x" << s.K << " variant " << variant);
    CHECK(check_case(c, Isa::avx2, 2, path, &zen) <= 1.0);
    ++variant;
  }
}

TEST_CASE(
    "x86 gemm: on cores that split 256-bit ops, x @ W.T of up to 32 rows (64 with W past L3) "
    "takes the dot path instead of the packed path",
    "[x86][gemm][dot]") {
  // dot_path.cpp (kDotMaxRowsOverPacked): AVX2 on split-256 cores, from 128 columns and K = 8 M,
  // up to 32 rows where the problem would take the packed path (not instead of the direct
  // kernels), up to 64 where W is larger than L3. Plans made on any host; run where it has AVX2.
  CacheSizes split;  // the Zen 1's
  split.split_256 = true;
  split.l2_bytes = 512 << 10;
  CacheSizes split_small_l3 = split;
  split_small_l3.l3_bytes = 1 << 20;  // W of 300 x 1000 floats is past it
  const CacheSizes whole = CacheSizes{};
  CHECK(x_wt_path({24, 1000, 1024}, Isa::avx2, split) == "dot");
  CHECK(x_wt_path({24, 1000, 1024}, Isa::avx2, whole) == "packed");
  CHECK(x_wt_path({32, 300, 512}, Isa::avx2, split) == "dot");
  CHECK(x_wt_path({17, 128, 256}, Isa::avx2, split) == "dot");
  CHECK(x_wt_path({33, 300, 512}, Isa::avx2, split) == "packed");
  CHECK(x_wt_path({24, 127, 1024}, Isa::avx2, split) != "dot");  // under 128 columns
  CHECK(x_wt_path({32, 300, 255}, Isa::avx2, split) != "dot");   // K under 8 M
  CHECK(x_wt_path({24, 128, 200}, Isa::avx2, split) == "direct");
  CHECK(x_wt_path({48, 300, 1000}, Isa::avx2, split_small_l3) == "dot");
  CHECK(x_wt_path({64, 300, 1000}, Isa::avx2, split_small_l3) == "dot");
  CHECK(x_wt_path({48, 300, 1000}, Isa::avx2, split) == "packed");
  CHECK(x_wt_path({65, 300, 1000}, Isa::avx2, split_small_l3) == "packed");
  CHECK(x_wt_path({48, 300, 1000}, Isa::avx512, split_small_l3) == "packed");  // AVX-512 keeps 32
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2; x @ W.T of 17-64 rows on the dot path not run\n");
    return;
  }
  // Odd rows (a pass's two rows and one left), K's vector tails, A's rows padded or reversed,
  // W's rows padded, every epilogue, C's rows padded; plans for 2 threads run on every pool.
  int variant = 0;
  for (const auto& [s, caches] :
       std::vector<std::pair<Shape, CacheSizes>>{{{17, 130, 300}, split},
                                                 {{24, 200, 259}, split},
                                                 {{31, 129, 520}, split},
                                                 {{32, 160, 301}, split},
                                                 {{47, 300, 1000}, split_small_l3},
                                                 {{64, 140, 2000}, split_small_l3}}) {
    Case c(s, variant % 2 ? Layout::padded : Layout::reversed_rows, Layout::transposed_padded,
           kEpilogueCycle[variant % 4], uint32_t(4061 + variant), 5);
    INFO(s.M << "x" << s.N << "x" << s.K << " variant " << variant);
    auto plan = GemmPlan::make(c.problem(), Isa::avx2, 2, false, caches);
    CHECK(path_taken(*plan, c, pool2()) == "dot");
    CHECK(worst_on_every_pool(*plan, c) <= 1.0);
    ++variant;
  }
}

TEST_CASE(
    "x86 gemm: on Zen cores that run 256-bit ops whole, x @ W.T of up to 24 rows takes the dot "
    "path instead of the packed path",
    "[x86][gemm][dot]") {
  // dot_path.cpp (kDotMaxRowsOverPackedZen): AVX2, from 128 columns and K = 8 M, up to 24 rows
  // where the problem would take the packed path, whatever W's size; AVX-512 and Intel's cores
  // keep their rules. Plans made on any host; run where it has AVX2.
  CacheSizes zen;
  zen.amd_zen = true;
  zen.l2_bytes = 512 << 10;
  CacheSizes zen_small_l3 = zen;
  zen_small_l3.l3_bytes = 1 << 20;
  CHECK(x_wt_path({24, 1000, 1024}, Isa::avx2, zen) == "dot");
  CHECK(x_wt_path({17, 128, 256}, Isa::avx2, zen) == "dot");
  CHECK(x_wt_path({25, 1000, 1024}, Isa::avx2, zen) == "packed");
  CHECK(x_wt_path({24, 127, 1024}, Isa::avx2, zen) != "dot");  // under 128 columns
  CHECK(x_wt_path({24, 300, 191}, Isa::avx2, zen) != "dot");   // K under 8 M
  CHECK(x_wt_path({48, 300, 1000}, Isa::avx2, zen_small_l3) == "packed");
  CHECK(x_wt_path({24, 1000, 1024}, Isa::avx2, CacheSizes{}) == "packed");
  CHECK(x_wt_path({24, 1000, 1024}, Isa::avx512, zen) == "dot");  // AVX-512's own 32 rows
  CHECK(x_wt_path({33, 1000, 1024}, Isa::avx512, zen) == "packed");
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2; x @ W.T of 17-24 rows on the dot path not run\n");
    return;
  }
  int variant = 0;
  for (Shape s : {Shape{17, 130, 300}, Shape{23, 200, 259}, Shape{24, 129, 520}}) {
    Case c(s, variant % 2 ? Layout::padded : Layout::reversed_rows, Layout::transposed_padded,
           kEpilogueCycle[variant % 4], uint32_t(4071 + variant), 5);
    INFO(s.M << "x" << s.N << "x" << s.K << " variant " << variant);
    auto plan = GemmPlan::make(c.problem(), Isa::avx2, 2, false, zen);
    CHECK(path_taken(*plan, c, pool2()) == "dot");
    CHECK(worst_on_every_pool(*plan, c) <= 1.0);
    ++variant;
  }
}

TEST_CASE("x86 gemm: a K too short for the dot path takes the direct kernels", "[x86][gemm][dot]") {
  // dot_path.cpp (dot_min_k, dot_min_k_b_rows): over a short K a dot product is mostly its
  // horizontal reduction; 10000 3-D points times a 3x3 matrix ran 7x faster on the direct kernels.
  // Planned for Intel's cores (256-bit ops whole, not a Zen), whatever the host's.
  CacheSizes whole_256 = host_cpu().caches;
  whole_256.split_256 = false;
  whole_256.amd_zen = false;
  for (Isa isa : supported_isas()) {
    const bool avx512 = isa == Isa::avx512;
    auto path_of = [&](Shape s, Layout lb) {
      Case c(s, Layout::row_major, lb, EpiKind{}, 4050, 0);
      return path_taken(*GemmPlan::make(c.problem(), isa, 2, false, whole_256), c, pool2());
    };
    INFO(isa_name(isa));
    // A @ B, 1-4 columns, from 17 rows: K from 8 (AVX2 4), 16, 32, 48.
    CHECK(path_of({10000, 3, 3}, Layout::row_major) == "direct");
    CHECK(path_of({1000, 4, 4}, Layout::row_major) == "direct");
    CHECK(path_of({1000, 1, avx512 ? 7 : 3}, Layout::row_major) == "direct");
    CHECK(path_of({1000, 1, avx512 ? 8 : 4}, Layout::row_major) == "dot");
    CHECK(path_of({100, 2, 15}, Layout::row_major) == "direct");
    CHECK(path_of({100, 2, 16}, Layout::row_major) == "dot");
    CHECK(path_of({100, 3, 31}, Layout::row_major) == "direct");
    CHECK(path_of({100, 3, 32}, Layout::row_major) == "dot");
    CHECK(path_of({100, 4, 47}, Layout::row_major) == "direct");
    CHECK(path_of({100, 4, 48}, Layout::row_major) == "dot");
    // 9-16 rows twice the K, 8 or fewer (one column) four times; with 3-4 columns on AVX-512
    // (one pass) 8-16 rows from K = 64.
    CHECK(path_of({16, 2, 31}, Layout::row_major) == "direct");
    CHECK(path_of({16, 2, 32}, Layout::row_major) == "dot");
    // (AVX2, two columns a pass: 8 rows from 3 k with two columns, 2 k with three or four.)
    CHECK(path_of({8, 2, avx512 ? 63 : 47}, Layout::row_major) == "direct");
    CHECK(path_of({8, 2, avx512 ? 64 : 48}, Layout::row_major) == "dot");
    CHECK(path_of({8, 3, 63}, Layout::row_major) == "direct");
    CHECK(path_of({8, 3, 64}, Layout::row_major) == "dot");
    CHECK(path_of({8, 4, 63}, Layout::row_major) == "direct");
    CHECK(path_of({8, 4, 64}, Layout::row_major) == (avx512 ? "dot" : "direct"));
    CHECK(path_of({8, 4, 96}, Layout::row_major) == "dot");
    CHECK(path_of({16, 3, 63}, Layout::row_major) == "direct");
    CHECK(path_of({16, 3, 64}, Layout::row_major) == "dot");
    CHECK(path_of({16, 4, 95}, Layout::row_major) == (avx512 ? "dot" : "direct"));
    CHECK(path_of({12, 4, 95}, Layout::row_major) == (avx512 ? "dot" : "direct"));
    CHECK(path_of({12, 4, 96}, Layout::row_major) == "dot");
    CHECK(path_of({1, 1, 1}, Layout::row_major) == "direct");
    CHECK(path_of({4, 1, avx512 ? 31 : 15}, Layout::row_major) == "direct");
    CHECK(path_of({4, 1, avx512 ? 32 : 16}, Layout::row_major) == "dot");
    // x @ W.T over several columns: AVX-512 K from 2 M (M < 4) or 4 M, AVX2 from M.
    CHECK(path_of({8, 1000, 3}, Layout::transposed) == "direct");
    CHECK(path_of({8, 1000, avx512 ? 31 : 7}, Layout::transposed) == "direct");
    CHECK(path_of({8, 1000, avx512 ? 32 : 8}, Layout::transposed) == "dot");
    CHECK(path_of({1, 1000, 2}, Layout::transposed) == "dot");
    CHECK(path_of({3, 1000, avx512 ? 5 : 2}, Layout::transposed) == "direct");
    CHECK(path_of({3, 1000, avx512 ? 6 : 3}, Layout::transposed) == "dot");
    // 9-16 rows (AVX2 from 128 columns), 17-32 on AVX-512 from 128 columns, from K = 8 M; one
    // column keeps 8 rows.
    CHECK(path_of({9, 21, 71}, Layout::transposed) != "dot");
    CHECK(path_of({9, 21, 72}, Layout::transposed) == (avx512 ? "dot" : "direct"));
    CHECK(path_of({16, 1000, 127}, Layout::transposed) != "dot");
    CHECK(path_of({16, 1000, 128}, Layout::transposed) == "dot");
    CHECK(path_of({17, 1000, 135}, Layout::transposed) != "dot");
    CHECK(path_of({17, 1000, 136}, Layout::transposed) == (avx512 ? "dot" : "packed"));
    CHECK(path_of({33, 1000, 1024}, Layout::transposed) != "dot");
    CHECK(path_of({9, 1, 1024}, Layout::transposed) == "dot");  // A's rows: a_rows
    {
      Case c({9, 1, 1024}, Layout::transposed, Layout::transposed, EpiKind{}, 4051, 0);
      // A's columns unit-stride: not the dot path's layout.
      CHECK(dot_path_for(c.problem(), isa, false, whole_256) == DotOver::none);
    }
  }
}

TEST_CASE("x86 gemm: a symbolic M keeps x @ W.T on the dot path, over a bounded set of kernels",
          "[x86][gemm][dot][dynamic]") {
  // dot_path_for: b_rows' kernels take M's rows one to four at a time (two on AVX2), so a
  // symbolic M (GemmProblem::dynamic_m) keeps them; a_rows' outputs are M, so it does not, nor
  // does a symbolic N or K. Every M from 1 up to the dot path's rows, against the reference, and
  // the kernels all of them use (one epilogue, plans for 2 threads): at most four vector counts
  // (as a pass and as the rest), each for the blocks and the last block, of each of the two
  // blockings (one pass or several).
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const auto& [N, K] : std::vector<std::pair<int64_t, int64_t>>{{37, 300}, {130, 1024}}) {
      std::set<std::string> names;
      int dot_plans = 0;
      const EpiKind e = kEpilogueCycle[variant % 4];
      for (int64_t M = 1; M <= 24; ++M) {
        Case c({M, N, K}, Layout::row_major, Layout::transposed, e, uint32_t(5300 + variant));
        GemmProblem p = c.problem();
        p.dynamic_m = true;
        const CacheSizes& host = host_cpu().caches;  // GemmPlan::make's below
        const bool exact_dot = dot_path_for(c.problem(), isa, false, host) == DotOver::b_rows;
        CHECK((dot_path_for(p, isa, false, host) == DotOver::b_rows) == exact_dot);
        auto plan = GemmPlan::make(p, isa, 2);
        INFO(isa_name(isa) << " " << M << "x" << N << "x" << K << " (M symbolic)");
        if (exact_dot) {
          CHECK(path_taken(*plan, c, pool2()) == "dot");
          for (const KernelInfo& k : plan->kernels()) names.insert(k.name);
          ++dot_plans;
        }
        CHECK(worst_on_every_pool(*plan, c) <= 1.0);
        ++variant;
      }
      INFO(isa_name(isa) << " N " << N << " K " << K);
      CHECK(dot_plans >= 8);
      CHECK(names.size() <= 16);
    }
  }
  // A @ B with few columns (a_rows) and a symbolic N or K stay off the dot path.
  Case narrow({64, 3, 512}, Layout::row_major, Layout::transposed, EpiKind{}, 5390);
  GemmProblem p = narrow.problem();
  REQUIRE(dot_path_for(p, Isa::avx2, false, host_cpu().caches) == DotOver::a_rows);
  p.dynamic_m = true;
  CHECK(dot_path_for(p, Isa::avx2, false, host_cpu().caches) == DotOver::none);
  Case wide({4, 130, 1024}, Layout::row_major, Layout::transposed, EpiKind{}, 5391);
  p = wide.problem();
  p.dynamic_nk = true;
  CHECK(dot_path_for(p, Isa::avx2, false, host_cpu().caches) == DotOver::none);
}
