// The direct_rows path (gemm_driver.cpp): above the small volume, with B in a fifth of L2 (AVX2)
// or a tenth (AVX-512; half where C's columns fit one column tile), the direct kernels run
// unpacked, M split into chunks of whole row blocks (or even chunks, where whole blocks are
// uneven), one per thread. Plans are made for a stated L2 size, so the path and the chunking do
// not depend on the host.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

const CacheSizes kZen3{512 * 1024};  // B may take up to 104857 bytes on AVX2, 52428 on AVX-512
const CacheSizes kOneMiB{1024 * 1024};

// The row counts of a plan's direct kernels of `isa`, in the order the plan lists them; empty if
// the plan has any other kernel.
std::vector<int64_t> direct_rows_of(const GemmPlan& plan, const Shape& s, Isa isa = Isa::avx2) {
  std::vector<int64_t> rows;
  const std::string tail = "N" + std::to_string(s.N) + "K" + std::to_string(s.K) + "_";
  const std::string prefix = std::string("direct_") + isa_name(isa) + "_M";
  for (const KernelInfo& k : plan.kernels()) {
    const size_t n_at = k.name.find(tail);
    if (k.name.rfind(prefix, 0) != 0 || n_at == std::string::npos) return {};
    rows.push_back(std::stoll(k.name.substr(prefix.size(), n_at - prefix.size())));
  }
  return rows;
}

}  // namespace

TEST_CASE("x86 gemm: direct_rows splits M into whole row blocks per thread, or evenly",
          "[x86][gemm][direct_rows]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; direct_rows chunking test not run\n");
    return;
  }
  struct Expect {
    Shape s;
    int threads;
    std::vector<int64_t> rows;  // chunk kernels: [full chunk,] last chunk
  };
  // AVX2 direct tiles: 6 rows x 2 vectors, or up to 12 rows of one vector when N <= 8.
  const std::vector<Expect> cases = {
      {{100, 130, 50}, 2, {54, 46}},  // 17 row blocks: 9 + 8
      {{13, 16, 1500}, 2, {7, 6}},    // whole blocks 12 + 1: even chunks instead
      {{11, 8, 3000}, 3, {11}},       // one row block, fewer than the threads
      {{100, 100, 100}, 1, {100}},    // one thread: one kernel over all of M
      {{64, 48, 100}, 4, {16}},       // 11 blocks over 4 threads (18 + 18 + 18 + 10): even
      {{120, 64, 256}, 2, {60}},      // equal chunks share one kernel
  };
  const Layout layouts[] = {Layout::row_major,        Layout::transposed,    Layout::strided,
                            Layout::padded,           Layout::reversed_rows, Layout::broadcast_row,
                            Layout::transposed_padded};
  int variant = 0;
  for (const Expect& x : cases) {
    for (Layout la : layouts) {
      // B transposed (x @ w.T) or strided: copied row-major by each chunk's thread.
      const Layout lb = variant % 5 == 0   ? Layout::row_major
                        : variant % 5 == 1 ? Layout::reversed_rows
                        : variant % 5 == 2 ? Layout::padded
                        : variant % 5 == 3 ? Layout::transposed
                                           : Layout::strided;
      const EpiKind e = variant % 2 ? EpiKind{Activation::gelu, true, true, true} : EpiKind{};
      Case c(x.s, la, lb, e, uint32_t(7000 + variant));
      const GemmProblem p = c.problem();
      auto plan = GemmPlan::make(p, Isa::avx2, x.threads, false, kZen3);
      INFO(x.s.M << "x" << x.s.N << "x" << x.s.K << " threads " << x.threads << " A "
                 << layout_name(la) << " B " << layout_name(lb) << " epilogue " << (variant % 2));
      // A's rows or its columns must be runs (a transposed A, here within half of L2); A
      // strided both ways takes the packed path.
      const bool a_runs = la != Layout::strided;
      CHECK(direct_rows_of(*plan, x.s) == (a_runs ? x.rows : std::vector<int64_t>{}));
      // On pools of other sizes than the plan's, and none: every chunk still runs once.
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: direct_rows only while B fits a fifth of L2, on AVX2",
          "[x86][gemm][direct_rows]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; direct_rows selection test not run\n");
    return;
  }
  auto is_direct_rows = [](Shape s, Layout la, Layout lb, const CacheSizes& caches, Isa isa) {
    Case c(s, la, lb, EpiKind{}, 1);
    auto plan = GemmPlan::make(c.problem(), isa, 2, false, caches);
    return !direct_rows_of(*plan, s, isa).empty();
  };
  CHECK(is_direct_rows({200, 200, 128}, Layout::row_major, Layout::row_major, kZen3,
                       Isa::avx2));  // 102400 bytes
  CHECK_FALSE(
      is_direct_rows({200, 200, 132}, Layout::row_major, Layout::row_major, kZen3, Isa::avx2));
  CHECK(is_direct_rows({200, 200, 132}, Layout::row_major, Layout::row_major,
                       CacheSizes{1024 * 1024}, Isa::avx2));
  // A transposed B is copied row-major by each thread (packing it, and A besides, ran slower:
  // 100x100x100 x @ w.T 12.2 -> 10.6 us, 256x64x200 28.4 -> 22.7 us, 2 threads, AVX-512).
  CHECK(is_direct_rows({100, 100, 100}, Layout::row_major, Layout::transposed, kZen3, Isa::avx2));
  // A transposed A is read in place while it fits in half of L2 (here 262144 bytes); past that
  // each k-step of a row block would load its lines from L3.
  CHECK(is_direct_rows({100, 100, 100}, Layout::transposed, Layout::row_major, kZen3, Isa::avx2));
  CHECK(is_direct_rows({256, 64, 256}, Layout::transposed, Layout::row_major, kZen3, Isa::avx2));
  CHECK_FALSE(
      is_direct_rows({256, 64, 257}, Layout::transposed, Layout::row_major, kZen3, Isa::avx2));
  CHECK(is_direct_rows({256, 64, 257}, Layout::row_major, Layout::row_major, kZen3, Isa::avx2));
  CHECK(is_direct_rows({256, 64, 256}, Layout::transposed_padded, Layout::transposed, kZen3,
                       Isa::avx512));
  CHECK_FALSE(
      is_direct_rows({100, 100, 100}, Layout::strided, Layout::row_major, kZen3, Isa::avx2));
  // B's rows a page or more apart: never (the walk down B's rows stalls, see kSkinnyMaxRowBytes).
  CHECK_FALSE(is_direct_rows({64, 1024, 16}, Layout::row_major, Layout::row_major,
                             CacheSizes{8 << 20}, Isa::avx2));
  // AVX-512: B in a tenth of L2 (its plans are made on any host; only running needs AVX-512).
  CHECK(is_direct_rows({200, 200, 65}, Layout::row_major, Layout::row_major, kZen3,
                       Isa::avx512));  // 52000 bytes
  CHECK_FALSE(
      is_direct_rows({200, 200, 66}, Layout::row_major, Layout::row_major, kZen3, Isa::avx512));
  CHECK(
      is_direct_rows({200, 200, 131}, Layout::row_major, Layout::row_major, kOneMiB, Isa::avx512));
  CHECK_FALSE(
      is_direct_rows({256, 256, 256}, Layout::row_major, Layout::row_major, kOneMiB, Isa::avx512));
  CHECK(is_direct_rows({100, 100, 100}, Layout::row_major, Layout::transposed, kZen3, Isa::avx512));
}

TEST_CASE("x86 gemm: AVX-512 direct_rows splits M into its tiles' row blocks",
          "[x86][gemm][direct_rows]") {
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; AVX-512 direct_rows run test not run\n");
    return;
  }
  struct Expect {
    Shape s;
    int threads;
    std::vector<int64_t> rows;
  };
  // AVX-512 direct tiles: 6 rows x 4 vectors, 9 x 3, 14 x 2 or 28 rows of one vector.
  const std::vector<Expect> cases = {
      {{100, 100, 100}, 2, {54, 46}},    // 7 vectors: 17 blocks of 6, 9 + 8
      {{120, 64, 256}, 2, {60}},         // 4 vectors: 20 blocks, 10 each
      {{2000, 24, 24}, 2, {1008, 992}},  // 2 vectors: 143 blocks of 14, 72 + 71
      {{40, 16, 1500}, 3, {20}},         // 1 vector: 2 blocks of 28 (28 + 12): even chunks
      {{45, 40, 200}, 2, {23, 22}},      // 3 vectors: 5 blocks of 9 (27 + 18): even chunks
  };
  int variant = 0;
  for (const Expect& x : cases) {
    for (Layout la :
         {Layout::row_major, Layout::padded, Layout::broadcast_row, Layout::transposed}) {
      const Layout lb = variant % 2 ? Layout::reversed_rows : Layout::row_major;
      const EpiKind e = variant % 2 ? EpiKind{Activation::silu, true, true, true} : EpiKind{};
      Case c(x.s, la, lb, e, uint32_t(7300 + variant));
      auto plan = GemmPlan::make(c.problem(), Isa::avx512, x.threads, false, kOneMiB);
      INFO(x.s.M << "x" << x.s.N << "x" << x.s.K << " threads " << x.threads << " A "
                 << layout_name(la) << " B " << layout_name(lb));
      CHECK(direct_rows_of(*plan, x.s, Isa::avx512) == x.rows);
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: direct_rows takes B up to half of L2 where C's columns fit one tile",
          "[x86][gemm][direct_rows]") {
  // One column tile of the direct tiling (AVX-512: 64 columns, AVX2: 16): each row block reads
  // A's rows once, and B (from L2) is all the kernels share. Not with two tiles, nor over half of
  // L2, nor where direct_k takes a small C.
  const CacheSizes two_mib{2 << 20};
  auto rows = [&](Shape s, Isa isa) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 7100);
    return direct_rows_of(*GemmPlan::make(c.problem(), isa, 2, false, two_mib), s, isa);
  };
  CHECK_FALSE(rows({1000, 64, 4000}, Isa::avx512).empty());  // 1000 KiB of B
  CHECK_FALSE(rows({3000, 24, 3000}, Isa::avx512).empty());
  CHECK(rows({1000, 64, 4100}, Isa::avx512).empty());  // over 1 MiB
  CHECK(rows({1000, 80, 1000}, Isa::avx512).empty());  // two tiles, over a tenth of L2
  CHECK(rows({100, 64, 3000}, Isa::avx512).empty());   // direct_k
  CHECK_FALSE(rows({2000, 16, 8000}, Isa::avx2).empty());
  CHECK(rows({2000, 32, 4000}, Isa::avx2).empty());  // two tiles
  // Against the reference on a 512 KiB L2 (B up to 256 KiB), every epilogue, on every pool.
  int variant = 0;
  for (Isa isa : supported_isas()) {
    const Shape s = isa == Isa::avx512 ? Shape{520, 64, 1000} : Shape{1100, 16, 4000};
    for (int e = 0; e < 2; ++e) {
      Case c(s, e ? Layout::padded : Layout::row_major, Layout::row_major,
             kEpilogueCycle[variant % 4], uint32_t(7200 + variant));
      auto plan = GemmPlan::make(c.problem(), isa, 2, false, kZen3);
      INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " epilogue " << variant % 4);
      REQUIRE_FALSE(direct_rows_of(*plan, s, isa).empty());
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      variant += 3;
    }
  }
}

TEST_CASE("x86 gemm: many rows over more than 128 columns take the packed path",
          "[x86][gemm][direct_rows]") {
  // gemm_driver.cpp, kDirectRowsWideMinRows / kDirectRowsWideMaxCols: from 1000 rows, C wider
  // than 128 columns (and than one column tile) is packed even with B within L2's share; fewer
  // rows, 128 columns or fewer, or one column tile stay direct.
  const CacheSizes two_mib{2 << 20};
  auto direct = [&](Shape s, Isa isa) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 7300);
    auto plan = GemmPlan::make(c.problem(), isa, 2, false, two_mib);
    if (!direct_rows_of(*plan, s, isa).empty()) return true;
    for (const KernelInfo& k : plan->kernels()) REQUIRE(k.name.rfind("packed_", 0) == 0);
    return false;
  };
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    INFO(isa_name(isa));
    CHECK_FALSE(direct({2000, 256, 200}, isa));  // 200 KiB of B: within a tenth of L2
    CHECK_FALSE(direct({1000, 129, 300}, isa));
    CHECK(direct({999, 256, 200}, isa));
    CHECK(direct({2000, 128, 200}, isa));
    CHECK(direct({4000, 100, 300}, isa));
  }
  CHECK(direct({20000, 64, 200}, Isa::avx512));  // one column tile
}

TEST_CASE("x86 gemm: small problems split over the threads from kSmallSplitMinFmas",
          "[x86][gemm][direct_rows]") {
  // gemm_plan.h: up to the small volume, a plan for two threads or more runs direct_rows (one
  // chunk of rows per thread, handed over by ThreadPool::run_parts) from kSmallSplitMinFmas
  // vector FMAs, where M makes two row blocks; below it, on one thread, or with neither A's rows
  // nor its columns runs, one direct kernel over all of M.
  struct Expect {
    Shape s;
    Isa isa;
    int threads;
    std::vector<int64_t> rows;  // the plan's direct kernels
  };
  const std::vector<Expect> cases = {
      {{64, 64, 64}, Isa::avx512, 2, {32}},      // 16384 FMAs: 11 blocks of 6, evenly
      {{64, 64, 64}, Isa::avx512, 1, {64}},      // one thread
      {{64, 64, 64}, Isa::avx512, 3, {22, 20}},  // 4 + 4 + 3 blocks: evenly instead
      {{48, 64, 64}, Isa::avx512, 2, {24}},      // 12288 FMAs: at the bound
      {{40, 64, 64}, Isa::avx512, 2, {40}},      // 10240 FMAs: under it
      {{57, 50, 70}, Isa::avx512, 2, {30, 27}},  // odd sizes, an edge vector
      {{20, 16, 1000}, Isa::avx512, 2, {20}},    // 20000 FMAs in one block of 28 rows
      {{64, 64, 64}, Isa::avx2, 2, {32}},        // 32768 FMAs: 11 blocks of 6, evenly
      {{24, 16, 256}, Isa::avx2, 2, {12}},       // 12288 FMAs: 4 blocks of 6
  };
  int variant = 0;
  for (const Expect& x : cases) {
    for (Layout la :
         {Layout::row_major, Layout::padded, Layout::broadcast_row, Layout::transposed}) {
      const Layout lb = variant % 2 ? Layout::reversed_rows : Layout::row_major;
      Case c(x.s, la, lb, kEpilogueCycle[variant % 4], uint32_t(7400 + variant));
      auto plan = GemmPlan::make(c.problem(), x.isa, x.threads, false, kOneMiB);
      INFO(isa_name(x.isa) << " " << x.s.M << "x" << x.s.N << "x" << x.s.K << " threads "
                           << x.threads << " A " << layout_name(la) << " B " << layout_name(lb));
      CHECK(direct_rows_of(*plan, x.s, x.isa) == x.rows);
      if (isa_supported(x.isa)) CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      ++variant;
    }
  }
  // Neither A's rows nor its columns runs: one direct kernel reading A in place, not split.
  Case c({64, 64, 64}, Layout::strided, Layout::row_major, EpiKind{}, 7450);
  auto plan = GemmPlan::make(c.problem(), Isa::avx512, 2, false, kOneMiB);
  CHECK(direct_rows_of(*plan, {64, 64, 64}, Isa::avx512) == std::vector<int64_t>{64});
  if (isa_supported(Isa::avx512)) CHECK(worst_on_every_pool(*plan, c) <= 1.0);
}
