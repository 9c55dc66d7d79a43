// GEMV-like problems read along the rows of their large operand (dot_path.cpp, dot_kernel.cpp):
// x @ W.T (up to 8 rows of A, B's rows unit-stride along K), A @ b for one column b; and A.T @ b,
// a one-column C run on the stream path as its transpose (gemm_driver.cpp, column_as_row). The
// path each takes, and each against the reference over K's vector tails, output groups of 1-8,
// chunks and L2 blocks, strided and reversed operands, every epilogue (the N = 1 bias one value
// for every row), plans for 1-4 threads run on pools of 1-3 and none.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/kernel_registry.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <sys/mman.h>
#include <unistd.h>
#include <set>
#include <regex>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

// The path a plan's problem takes on `pool`, by the counter that moved.
std::string path_taken(const GemmPlan& plan, Case& c, kiln::ThreadPool& pool) {
  const GemmStats before = stats();
  plan.run(c.problem(), pool);
  const GemmStats after = stats();
  if (after.dot_calls > before.dot_calls) return "dot";
  if (after.stream_calls > before.stream_calls) return "stream";
  if (after.direct_calls > before.direct_calls) return "direct";
  if (after.skinny_calls > before.skinny_calls) return "skinny";
  if (after.packed_calls > before.packed_calls) return "packed";
  return "none";
}

kiln::ThreadPool& pool2() {
  static kiln::ThreadPool pool(2);
  return pool;
}

// A plan for c's problem on `threads` threads, checked on every pool; it must take `path`. A
// "dot" case whose K is too short for the dot path to pay (dot_path_for; its bounds are checked
// on their own below) must take another path, and is checked there; one the dot path may take
// instead of the packed path (dot_path_for's instead_of_packed) either.
double check_case(Case& c, Isa isa, int threads, const char* path,
                  const CacheSizes* caches = nullptr) {
  auto plan = caches ? GemmPlan::make(c.problem(), isa, threads, false, *caches)
                     : GemmPlan::make(c.problem(), isa, threads);
  const std::string taken = path_taken(*plan, c, pool2());
  const CacheSizes& plan_caches = caches ? *caches : host_cpu().caches;
  if (std::string(path) == "dot" &&
      dot_path_for(c.problem(), isa, false, plan_caches) == DotOver::none) {
    if (dot_path_for(c.problem(), isa, false, plan_caches, true) == DotOver::none)
      CHECK(taken != "dot");
  } else {
    CHECK(taken == path);
  }
  return worst_on_every_pool(*plan, c);
}

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

TEST_CASE("x86 gemm: dot kernels for both ISAs generate on any host", "[x86][gemm][dot][listing]") {
  // Generated and listed only (the AVX-512 one runs only where the CPU has it): zmm FMAs over the
  // K loop folded to ymm (vextractf64x4), the cross-lane sums, a broadcast bias, a masked K tail
  // and a partial last group.
  for (int64_t ld : {1, 5}) {
    for (Isa isa : {Isa::avx512, Isa::avx2}) {
      KernelDesc d;
      d.kind = KernelKind::dot;
      d.isa = int64_t(isa);
      d.rows = 1;
      d.cols = 13;
      d.K = 37;
      d.a_cs = 1;
      d.b_rs = 40;
      d.ldc = ld;
      d.ld_res = ld == 1 ? 1 : 3;
      d.has_bias = 1;
      d.bias_bcast = 1;
      d.act = int64_t(Activation::gelu);
      d.has_residual = 1;
      const Kernel& k = get_kernel(d);
      const std::string& listing = kernel_listing(k);
      INFO(isa_name(isa) << "\n" << listing.substr(0, 3000));
      const std::string v = isa == Isa::avx512 ? "zmm" : "ymm";
      CHECK(listing.find("vfmadd231ps " + v) != std::string::npos);
      CHECK(listing.find("vhaddps ymm") != std::string::npos);
      CHECK(listing.find("vperm2f128 ymm") != std::string::npos);
      CHECK(listing.find("vbroadcastss ymm") != std::string::npos);
      CHECK((listing.find("vextractf64x4") != std::string::npos) == (isa == Isa::avx512));
      // K's tail of 5 (37 = 4 x 8 + 5): AVX-512 masked by k1; AVX2 by xmm moves of exactly its
      // floats (lane 4 by itself, copied up, then lanes 0-3 inserted), no vmaskmovps.
      if (isa == Isa::avx512) {
        CHECK(listing.find("{k1}") != std::string::npos);
      } else {
        CHECK(listing.find("vmaskmovps") == std::string::npos);
        CHECK(std::regex_search(listing, std::regex(R"(vinsertf128 ymm\d+, ymm\d+, \[)")));
      }
      // Outputs and residual elements rows apart: stored and gathered one lane at a time.
      CHECK((listing.find("vextractps") != std::string::npos) == (ld != 1));
      CHECK((listing.find("vinsertps") != std::string::npos) == (ld != 1));
    }
  }
  // Two vectors: AVX-512 only (sixteen accumulators, zmm16-23 the second vector's).
  KernelDesc d;
  d.kind = KernelKind::dot;
  d.isa = int64_t(Isa::avx512);
  d.rows = 2;
  d.cols = 13;
  d.K = 37;
  d.a_cs = 1;
  d.a_rs = 45;
  d.b_rs = 40;
  d.ldc = 1;
  const std::string& listing = kernel_listing(get_kernel(d));
  INFO(listing.substr(0, 3000));
  CHECK(listing.find("vfmadd231ps zmm23") != std::string::npos);
  CHECK(listing.find("+180]") != std::string::npos);  // the second vector, 45 floats on
  // Three and four vectors: groups of four rows of X, each row loaded once for all of them
  // (zmm12-15 the vectors, zmm16-23 the third's and fourth's accumulators).
  for (int vecs : {3, 4}) {
    KernelDesc dq = d;
    dq.rows = vecs;
    const std::string& lq = kernel_listing(get_kernel(dq));
    INFO(vecs << " vectors\n" << lq.substr(0, 3000));
    CHECK(lq.find(vecs == 4 ? "+540]" : "+360]") != std::string::npos);  // the last vector
    CHECK((lq.find("+540]") != std::string::npos) == (vecs == 4));
    CHECK(lq.find(vecs == 4 ? "vfmadd231ps zmm23, zmm15" : "vfmadd231ps zmm19, zmm14") !=
          std::string::npos);
  }
  // k_align: the head's and the two last steps' masks from X's address (bzhi), the head's and
  // the second's steps skipped where their masks are empty (kortestw), loads under k2-k4.
  KernelDesc dk = d;
  dk.rows = 4;
  dk.K = 300;
  dk.b_rs = 304;
  dk.a_rs = 304;
  dk.k_align = 1;
  const std::string& lk = kernel_listing(get_kernel(dk));
  INFO("k_align\n" << lk.substr(0, 3000));
  CHECK(lk.find("bzhi") != std::string::npos);
  CHECK(lk.find("kortestw k2, k2") != std::string::npos);
  CHECK(lk.find("kortestw k4, k4") != std::string::npos);
  CHECK(lk.find("{k3}{z}") != std::string::npos);
  dk.b_rs = 300;  // X's rows not whole lines apart
  CHECK_THROWS(get_kernel(dk));
  // AVX2: the masks from the table, kept on the stack between groups, the steps skipped where
  // empty (vtestps). Where both vectors sit whole vectors apart (a_rs 304), each step as aligned
  // loads ANDed with its mask, taken at run time by the flag at [rsp+96] (X and v on boundaries
  // together), or as K's last floats by xmm moves (no head then): no vmaskmovps. Where the
  // second vector would sit off them (a_rs 300), vmaskmovps under the masks.
  dk.isa = int64_t(Isa::avx2);
  dk.rows = 2;
  dk.b_rs = 296;
  const std::string& lk2 = kernel_listing(get_kernel(dk));
  INFO("k_align, AVX2\n" << lk2.substr(0, 3000));
  CHECK(lk2.find("vtestps ymm11, ymm11") != std::string::npos);
  CHECK(lk2.find("[rsp+64]") != std::string::npos);
  CHECK(lk2.find("vandps ymm12, ymm14, [") != std::string::npos);
  CHECK(lk2.find("vandps ymm12, ymm11, [") != std::string::npos);
  CHECK(lk2.find("dword ptr [rsp+96]") != std::string::npos);
  CHECK(lk2.find("vmaskmovps") == std::string::npos);
  CHECK(lk2.find("vmovups xmm12, [") != std::string::npos);  // K 300: r0 = 12 = 8 + 4
  dk.a_rs = 300;
  const std::string& lk3 = kernel_listing(get_kernel(dk));
  INFO("k_align, AVX2, a_rs 300\n" << lk3.substr(0, 3000));
  CHECK(lk3.find("vmaskmovps ymm12, ymm14") != std::string::npos);
  CHECK(lk3.find("vandps ymm12, ymm14, [") == std::string::npos);
  CHECK(lk3.find("[rsp+96]") == std::string::npos);
  d.rows = 5;
  CHECK_THROWS(get_kernel(d));
  // AVX2: two vectors in groups of four rows (ymm8-9 the rows, ymm12-13 the vectors); no more.
  d.rows = 2;
  d.isa = int64_t(Isa::avx2);
  const std::string& l2 = kernel_listing(get_kernel(d));
  INFO("AVX2, 2 vectors\n" << l2.substr(0, 3000));
  CHECK(l2.find("vfmadd231ps ymm7, ymm13, ymm9") != std::string::npos);
  CHECK(l2.find("+180]") != std::string::npos);
  CHECK(l2.find("zmm") == std::string::npos);
  d.rows = 3;
  CHECK_THROWS(get_kernel(d));
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

TEST_CASE("x86 gemm: the dot path's kernels align X's loads at run time (k_align)",
          "[x86][gemm][dot]") {
  // From K = 256 (AVX2: 128), where X's rows are whole vectors apart, the kernel finds how far X
  // sits off a vector's boundary (AVX-512: a 64-byte line; AVX2: 32 bytes) and takes a masked
  // head first (dot_kernel.cpp). Every one of the 16 distances,
  // with v as far off its line as X (the head taken) and not (no head); K a multiple of the
  // vector and not (the two masked steps after the whole vectors: 0-30 elements); outputs in
  // groups and partial ones; one to five vectors a pass, their rest kernel; every epilogue.
  struct Form {
    Shape s;
    Layout la, lb;
    bool ka;  // X's rows whole 64-byte lines apart (and so whole 32-byte vectors)
  };
  const Form forms[] = {
      // x @ W.T: X = W's rows (B's columns), v = A's rows.
      {{4, 37, 256}, Layout::row_major, Layout::transposed, true},
      {{5, 9, 1024}, Layout::row_major, Layout::transposed, true},
      {{1, 130, 400}, Layout::row_major, Layout::transposed, true},
      {{3, 8, 267}, Layout::row_major, Layout::transposed_padded, true},   // X's rows 272 apart
      {{1, 1, 1035}, Layout::row_major, Layout::transposed_padded, true},  // one output
      {{13, 130, 512}, Layout::row_major, Layout::transposed, true},       // 4 + 4 + 4 + 1
      {{4, 33, 300}, Layout::row_major, Layout::transposed, false},        // rows 300 apart
      // From 256 outputs v is copied to X's distance off a line where it sits at another
      // (run_dot, kDotRealignMinOuts); A's rows reversed (a negative row stride) too.
      {{5, 300, 512}, Layout::row_major, Layout::transposed, true},
      {{3, 260, 256}, Layout::reversed_rows, Layout::transposed, true},
      // A @ B with 1-4 columns: X = A's rows, v = B's columns (copied where not contiguous).
      {{40, 3, 512}, Layout::row_major, Layout::transposed, true},
      {{33, 2, 377}, Layout::padded, Layout::row_major, true},  // A's rows 384 apart, B copied
      {{300, 3, 512}, Layout::row_major, Layout::transposed, true},
      {{257, 4, 384}, Layout::row_major, Layout::row_major, true},
  };
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Form& f : forms) {
      for (int shift = 0; shift < 16; ++shift) {
        // v as far off its line as X, or 5 floats further.
        for (int v_further : {0, 5}) {
          const bool over_a = f.s.N <= 4 && f.s.M > 4;
          const int x_shift = shift, v_shift = (shift + v_further) % 16;
          const EpiKind e = kEpilogueCycle[variant % 4];
          Case c(f.s, f.la, f.lb, e, uint32_t(4900 + variant), 3, over_a ? x_shift : v_shift,
                 over_a ? v_shift : x_shift);
          auto plan = GemmPlan::make(c.problem(), isa, 1 + variant % 3);
          bool ka = false;
          for (const auto& k : plan->kernels()) ka |= k.name.find("_ka") != std::string::npos;
          INFO(isa_name(isa) << " " << f.s.M << "x" << f.s.N << "x" << f.s.K << " X " << x_shift
                             << " floats off a line, v " << v_shift << ", epilogue "
                             << variant % 4);
          CHECK(ka == f.ka);
          CHECK(path_taken(*plan, c, pool2()) == "dot");
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
    }
  }
}

namespace {

// `floats` floats between two inaccessible pages (PROT_NONE), at the start of the mapped body or
// ending at its end.
class GuardedFloats {
 public:
  GuardedFloats(int64_t floats, bool at_end) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t body = (size_t(floats) * 4 + page - 1) / page * page;
    len_ = body + 2 * page;
    void* m = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    base_ = static_cast<char*>(m);
    mprotect(base_, page, PROT_NONE);
    mprotect(base_ + page + body, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(base_ + page + (at_end ? body - size_t(floats) * 4 : 0));
  }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  ~GuardedFloats() { munmap(base_, len_); }
  float* data() const { return data_; }

 private:
  char* base_ = nullptr;
  size_t len_ = 0;
  float* data_ = nullptr;
};

}  // namespace

TEST_CASE("x86 gemm: AVX2 k_align's ANDed steps stay within their floats' pages",
          "[x86][gemm][dot]") {
  // x @ W.T on AVX2 with k_align: where X and v sit the same distance off a 32-byte boundary the
  // masked steps load whole aligned vectors and AND them with their masks (dot_kernel.cpp,
  // and_steps_), reading past the floats they need but never past the aligned vector that holds
  // one of them. W against an inaccessible page at its start or its end, v against one too, at
  // every distance 0-7 floats off a boundary; v as far off as W (the ANDed steps) or not (K's
  // last floats by xmm moves: an ANDed load there, unaligned, would cross into the guard page and
  // fault). K of 300 (W's rows 304 apart: the head and both steps after the whole vectors) and
  // of 1029 (one row).
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; AVX2 dot kernels not run\n");
    return;
  }
  struct Form {
    int64_t N, K, rs;
  };
  for (const Form f : {Form{24, 300, 304}, Form{1, 1029, 1029}}) {
    for (int w_shift = 0; w_shift < 8; ++w_shift) {
      for (int v_further : {0, 3}) {
        for (bool at_end : {false, true}) {
          const int v_shift = (w_shift + v_further) % 8;
          // The floats' extent, and the floats after them (at a page's end) or before them (at
          // its start) that put them `shift` floats past a boundary.
          const int64_t w_floats = (f.N - 1) * f.rs + f.K, v_floats = f.K;
          const int64_t w_pad = at_end ? ((-(w_floats + w_shift)) % 8 + 8) % 8 : w_shift;
          const int64_t v_pad = at_end ? ((-(v_floats + v_shift)) % 8 + 8) % 8 : v_shift;
          GuardedFloats w(w_floats + w_pad, at_end), v(v_floats + v_pad, at_end);
          float* W = at_end ? w.data() : w.data() + w_pad;
          float* V = at_end ? v.data() : v.data() + v_pad;
          REQUIRE(uintptr_t(W) / 4 % 8 == uintptr_t(w_shift));
          REQUIRE(uintptr_t(V) / 4 % 8 == uintptr_t(v_shift));
          for (int64_t i = 0; i < w_floats; ++i) W[i] = float((i * 7 + 3) % 23) / 23 - 0.5f;
          for (int64_t k = 0; k < f.K; ++k) V[k] = float((k * 5 + 1) % 19) / 19 - 0.5f;
          std::vector<float> c(size_t(f.N), -7.0f);
          GemmProblem p;
          p.M = 1, p.N = f.N, p.K = f.K;
          p.a = MatrixRef{V, f.K, 1};
          p.b = MatrixRef{W, 1, f.rs};
          p.c = c.data();
          p.ldc = f.N;
          auto plan = GemmPlan::make(p, Isa::avx2, 1);
          bool ka = false;
          for (const auto& k : plan->kernels()) ka |= k.name.find("_ka") != std::string::npos;
          INFO(f.N << "x" << f.K << ", W " << w_shift << " floats off a boundary, v " << v_shift
                   << (at_end ? ", both ending at a page's end" : ", both at a page's start"));
          CHECK(ka);
          plan->run(p, pool2());
          for (int64_t j = 0; j < f.N; ++j) {
            double want = 0, mag = 0;
            for (int64_t k = 0; k < f.K; ++k) {
              want += double(V[k]) * W[j * f.rs + k];
              mag += std::abs(double(V[k]) * W[j * f.rs + k]);
            }
            CHECK(std::abs(c[size_t(j)] - want) <= 1e-5 * mag + 1e-6);
          }
        }
      }
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
