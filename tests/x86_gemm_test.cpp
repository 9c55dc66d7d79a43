// Differential tests of the x86 GEMM (both ISAs, every path) against a double-accumulating
// reference: shape sweep, transposed/strided/offset operands, batched with broadcasting,
// prepacked B, symbolic dims, concurrent callers, large blocking, and the path each shape takes.
// Epilogues: x86_gemm_epilogue_test.cpp; the skinny path: x86_skinny_test.cpp.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/generators.h"
#include "jit/thread_pool.h"

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

TEST_CASE("x86 gemm: shape sweep, row-major operands", "[x86][gemm]") {
  const std::vector<int64_t> small = {1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 23, 31, 32, 33};
  std::vector<Shape> shapes;
  // Sparse cross of 1..33: every (M, N) pair with a K that rotates through the list.
  for (size_t i = 0; i < small.size(); ++i)
    for (size_t j = 0; j < small.size(); ++j)
      shapes.push_back({small[i], small[j], small[(i * 7 + j * 3) % small.size()]});
  const std::vector<int64_t> large = {64, 127, 128, 129, 255, 256, 511, 1000, 1024};
  for (size_t i = 0; i < large.size(); ++i) {
    const int64_t d = large[i], o = small[(i * 5) % small.size()];
    shapes.push_back({d, 33, 17});
    shapes.push_back({17, d, 33});
    shapes.push_back({33, 17, d});
    shapes.push_back({1, d, d});
    shapes.push_back({d, 1, d});
    shapes.push_back({d, d, o});
  }
  for (Shape s : std::vector<Shape>{{64, 64, 64},
                                    {128, 128, 128},
                                    {129, 255, 511},
                                    {256, 1000, 129},
                                    {1000, 129, 256},
                                    {511, 127, 1024},
                                    {128, 1024, 1000},
                                    {255, 256, 1024},
                                    {1, 4096, 300}})
    shapes.push_back(s);
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K);
      Case c(s, Layout::row_major, Layout::row_major, EpiKind{},
             uint32_t(s.M * 131 + s.N * 7 + s.K));
      c.run(pool2(), isa);
      CHECK(c.max_violation() <= 1.0);
    }
  }
}

TEST_CASE("x86 gemm: transposed, strided and offset operands", "[x86][gemm]") {
  const std::vector<Shape> shapes = {{1, 1, 1},      {5, 7, 3},    {16, 16, 16},    {23, 57, 91},
                                     {1, 300, 77},   {4, 200, 40}, {64, 64, 64},    {33, 17, 129},
                                     {129, 65, 300}, {200, 1, 70}, {300, 260, 400}, {17, 1000, 33}};
  const Layout layouts[] = {Layout::row_major,     Layout::transposed, Layout::strided,
                            Layout::broadcast_row, Layout::padded,     Layout::reversed_rows};
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (Layout la : layouts) {
        for (Layout lb : layouts) {
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " A " << layout_name(la)
                             << " B " << layout_name(lb));
          Case c(s, la, lb, EpiKind{}, uint32_t(s.M + 3 * s.N + 11 * s.K + int(la) * 5 + int(lb)));
          c.run(pool2(), isa);
          CHECK(c.max_violation() <= 1.0);
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: direct tiles of 7-14 rows in one block (AVX-512: 9 x 3, 14 x 2 vectors)",
          "[x86][gemm]") {
  // direct_kernel.cpp's direct_tiling: with 7-14 rows AVX-512 narrows its tile so one block
  // takes every row; column edges of each width (49 = 3 * 16 + 1, 100 = 2 * 48 + 4 = 3 * 32 + 4),
  // the skinny path's N chunks (8x1000x600: 48-wide tiles), and every epilogue.
  const std::vector<Shape> shapes = {{7, 49, 33},   {8, 64, 64},    {9, 100, 17},   {10, 49, 70},
                                     {12, 129, 40}, {14, 100, 100}, {8, 1000, 600}, {7, 300, 1100},
                                     {13, 200, 9},  {9, 200, 100}};
  // The tiles themselves (a rule, checked on any host): 7-9 rows 9 x 3, 10-14 rows 14 x 2; 6 and
  // 15 rows keep 6 x 4; AVX2 keeps 6 x 2.
  auto tiling = [](bool avx512, int64_t M, int64_t N) {
    const DirectTiling t = direct_tiling(avx512, M, N);
    return std::pair<int, int>{t.rows_max, t.vectors};
  };
  CHECK(tiling(true, 8, 64) == std::pair<int, int>{9, 3});
  CHECK(tiling(true, 9, 1000) == std::pair<int, int>{9, 3});
  CHECK(tiling(true, 10, 64) == std::pair<int, int>{14, 2});
  CHECK(tiling(true, 14, 100) == std::pair<int, int>{14, 2});
  CHECK(tiling(true, 6, 64) == std::pair<int, int>{6, 4});
  CHECK(tiling(true, 15, 64) == std::pair<int, int>{6, 4});
  CHECK(tiling(false, 8, 64) == std::pair<int, int>{6, 2});
  const Layout layouts[] = {Layout::row_major, Layout::padded, Layout::reversed_rows,
                            Layout::transposed};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (Layout la : layouts) {
        const Layout lb = layouts[(variant + 1) % 3];
        const EpiKind e = kEpilogueCycle[variant % 4];
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " A " << layout_name(la)
                           << " B " << layout_name(lb) << " epilogue " << variant % 4);
        Case c(s, la, lb, e, uint32_t(5100 + variant));
        const GemmStats before = stats();
        c.run(pool2(), isa);
        const GemmStats after = stats();
        if (la != Layout::transposed)  // else packed where the volume is over 64^3
          CHECK(after.direct_calls + after.skinny_calls >
                before.direct_calls + before.skinny_calls);
        CHECK(c.max_violation() <= 1.0);
        ++variant;
      }
    }
  }
}

TEST_CASE("x86 gemm: batched with broadcast batch dims", "[x86][gemm][batched]") {
  // Small problems run one per task; larger ones (70x90x110, 130x70x300) one per task as far as
  // the batch shares out evenly over the threads, the rest one after another on all threads (5
  // on 2 threads: 4 + 1, on 3: 3 + 2; 6: all per task).
  static kiln::ThreadPool pool3(3);
  const std::vector<Shape> shapes = {
      {4, 5, 6}, {16, 16, 16}, {1, 100, 64}, {70, 90, 110}, {130, 70, 300}};
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (int mode = 0; mode < 3; ++mode) {  // 0: all batched, 1: B broadcast, 2: A broadcast
        for (int64_t batch : {5, 6}) {
          kiln::ThreadPool& pool = (mode + batch) % 2 ? pool2() : pool3;
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " mode " << mode
                             << " batch " << batch << " threads " << pool.num_threads());
          BatchedCase bc(s, batch, mode != 2, mode != 1,
                         EpiKind{Activation::silu, true, false, true, false, true},
                         uint32_t(mode + s.K + batch));
          bc.run(pool, isa);
          CHECK(bc.max_violation() <= 1.0);
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: prepacked B", "[x86][gemm][prepacked]") {
  const std::vector<Shape> shapes = {
      {1, 1, 1}, {3, 50, 7}, {128, 96, 1024}, {130, 257, 300}, {1, 4096, 64}};
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (Layout lb : {Layout::row_major, Layout::transposed}) {
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " B " << layout_name(lb));
        Case c(s, Layout::row_major, lb, EpiKind{Activation::gelu, true, true, false},
               uint32_t(s.N));
        auto packed = pack_b(c.b_ref(), s.K, s.N, isa);
        // Run twice: the packed B is reused, never modified.
        c.run_prepacked(pool2(), *packed);
        CHECK(c.max_violation() <= 1.0);
        c.run_prepacked(pool2(), *packed);
        CHECK(c.max_violation() <= 1.0);
      }
    }
  }
}

TEST_CASE("x86 gemm: an ISA this CPU cannot run is an error, not an illegal instruction",
          "[x86][gemm]") {
  // gemm() refused such an ISA already; pack_b() ran AVX-512's packing on an AVX2 host (SIGILL).
  bool checked = false;
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    if (isa_supported(isa)) continue;
    checked = true;
    INFO(isa_name(isa));
    std::vector<float> b(10 * 40, 1.0f);
    CHECK_THROWS_WITH(pack_b(MatrixRef{b.data(), 40, 1}, 10, 40, isa),
                      Catch::Contains(std::string("cannot pack B for ") + isa_name(isa)));
    Case c({8, 8, 8}, Layout::row_major, Layout::row_major, EpiKind{}, 1);
    CHECK_THROWS_WITH(gemm(c.problem(), pool2(), isa), Catch::Contains("cannot run"));
  }
  if (!checked) std::printf("SKIPPED: this CPU runs every ISA; no unsupported ISA to refuse\n");
}

TEST_CASE("x86 gemm: empty and degenerate shapes", "[x86][gemm]") {
  for (Isa isa : supported_isas()) {
    for (Shape s : std::vector<Shape>{
             {0, 5, 5}, {5, 0, 5}, {5, 5, 0}, {1, 1, 0}, {300, 300, 0}, {40, 1, 0}}) {
      INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K);
      Case c(s, Layout::row_major, Layout::row_major, EpiKind{Activation::relu, true, false, true},
             3);
      c.run(pool2(), isa);
      CHECK(c.max_violation() <= 1.0);
    }
  }
}

TEST_CASE("x86 gemm: shapes take their fast path", "[x86][gemm][stats]") {
  for (Isa isa : supported_isas()) {
    // dynamic_m: with M symbolic (checked against the reference too).
    auto path_of = [&](Shape s, bool dynamic_m = false) {
      Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 1);
      GemmProblem p = c.problem();
      p.dynamic_m = dynamic_m;
      GemmStats before = stats();
      gemm(p, pool2(), isa);
      GemmStats after = stats();
      CHECK(c.max_violation() <= 1.0);
      if (after.direct_calls > before.direct_calls) return "direct";
      if (after.skinny_calls > before.skinny_calls) return "skinny";
      if (after.stream_calls > before.stream_calls) return "stream";
      if (after.packed_calls > before.packed_calls) return "packed";
      return "none";
    };
    CHECK(std::string(path_of({16, 16, 16})) == "direct");
    CHECK(std::string(path_of({23, 57, 91})) == "direct");
    CHECK(std::string(path_of({1, 2048, 512})) == "stream");
    // A GEMV within the small volume: direct under 64 Ki elements of B, else stream.
    CHECK(std::string(path_of({1, 100, 100})) == "direct");
    CHECK(std::string(path_of({1, 512, 512})) == "stream");
    CHECK(std::string(path_of({4, 1000, 512})) == "skinny");
    // Up to 16 rows (AVX-512: 32); a narrow C with a long K takes direct_k instead.
    CHECK(std::string(path_of({16, 1000, 300})) == "skinny");
    CHECK(std::string(path_of({32, 1000, 300})) == (isa == Isa::avx2 ? "packed" : "skinny"));
    CHECK(std::string(path_of({33, 1000, 300})) == "packed");
    CHECK(std::string(path_of({8, 100, 4096})) == "direct");
    // With M symbolic, skinny up to 8 rows where B is within a tenth of L2 (the direct kernels'
    // row blocks take more), else as far as with M exact (its kernels, specialized per M, at
    // most 16 or 32 per N and K).
    auto skinny_when_dynamic = [&](Shape s) {
      Case c(s, Layout::row_major, Layout::row_major, EpiKind{}, 1);
      GemmProblem p = c.problem();
      p.dynamic_m = true;
      const std::string first = GemmPlan::make(p, isa, 2)->kernels().at(0).name;
      return first.rfind("direct_", 0) == 0;
    };
    CHECK(skinny_when_dynamic({8, 1000, 300}));
    CHECK(skinny_when_dynamic({16, 1000, 300}));
    CHECK(skinny_when_dynamic({32, 1000, 300}) == (isa == Isa::avx512));
    CHECK_FALSE(skinny_when_dynamic({33, 1000, 300}));
    CHECK(std::string(path_of({16, 1000, 300}, true)) == "skinny");
    CHECK(std::string(path_of({9, 100, 100}, true)) == "direct");  // B 40 KB: row blocks
    // K = 0 there: one empty K block, C = the epilogue of zero (planning divided by zero once;
    // found by tests/fuzz/x86_gemm_fuzz.cpp).
    for (int64_t m : {2, 5, 8}) {
      Case c({m, 3, 0}, Layout::row_major, Layout::row_major,
             EpiKind{Activation::none, true, true, false}, uint32_t(m));
      GemmProblem p = c.problem();
      p.dynamic_m = true;
      auto plan = GemmPlan::make(p, isa, 2);
      CHECK(plan->kernels().at(0).name.rfind("direct_", 0) == 0);
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
    }
    // B's rows a page or more apart: skinny up to 12 rows, else packed (gemm_driver.cpp,
    // kSkinnyMaxRowBytes, kSkinnyPageApartRows).
    // (AVX2 on Zen cores that run 256-bit ops whole: the stream path over those rows, from K = 32;
    // stream_path.cpp, stream_rows_for.)
    const CacheSizes& host = host_cpu().caches;
    const char* page_apart =
        host.amd_zen && !host.split_256 && isa == Isa::avx2 ? "stream" : "skinny";
    CHECK(std::string(path_of({4, 1024, 512})) == page_apart);
    CHECK(std::string(path_of({12, 4096, 1024})) == page_apart);
    CHECK(std::string(path_of({13, 1024, 512})) == "packed");
    // Above the small volume with B in a fifth of L2 (AVX2) or a tenth (AVX-512): the direct
    // kernels split over M (gemm_driver.cpp, kDirectRowsBShare); B of 256^3 is 256 KiB, of 100^3
    // 40 KB.
    auto rows_path = [&](int64_t b_bytes) {
      const int64_t share = isa == Isa::avx2 ? 5 : 10;
      return b_bytes <= host_cpu().caches.l2_bytes / share ? "direct" : "packed";
    };
    CHECK(std::string(path_of({256, 256, 256})) == rows_path(256 * 256 * 4));
    CHECK(std::string(path_of({100, 100, 100})) == rows_path(100 * 100 * 4));
    CHECK(std::string(path_of({2000, 24, 24})) == rows_path(24 * 24 * 4));
  }
}

TEST_CASE(
    "x86 gemm: symbolic extents get exact plans within a kernel budget and bounded ones after",
    "[x86][gemm][stats]") {
  // gemm_entry.cpp (make_plan). Each shape against the reference, every epilogue in turn.
  int variant = 0;
  auto run = [&](Shape s, Isa isa, bool dynamic_m, bool dynamic_nk) {
    Case c(s, Layout::row_major, Layout::row_major, kEpilogueCycle[variant % 4],
           uint32_t(6300 + variant), 3);
    ++variant;
    GemmProblem p = c.problem();
    p.dynamic_m = dynamic_m;
    p.dynamic_nk = dynamic_nk;
    const GemmStats before = stats();
    gemm(p, pool2(), isa);
    const GemmStats after = stats();
    CHECK(c.max_violation() <= 1.0);
    GemmStats d;
    d.direct_calls = after.direct_calls - before.direct_calls;
    d.packed_calls = after.packed_calls - before.packed_calls;
    d.symbolic_exact_plans = after.symbolic_exact_plans - before.symbolic_exact_plans;
    d.symbolic_exact_kernels = after.symbolic_exact_kernels - before.symbolic_exact_kernels;
    d.symbolic_bounded_plans = after.symbolic_bounded_plans - before.symbolic_bounded_plans;
    return d;
  };
  for (Isa isa : supported_isas()) {
    INFO(isa_name(isa));
    // Within the budget: the exact problem's path (direct for these), its kernels charged.
    for (Shape s : {Shape{16, 16, 16}, Shape{23, 57, 91}, Shape{33, 33, 33}, Shape{9, 100, 100}}) {
      INFO(s.M << "x" << s.N << "x" << s.K);
      for (int dyn = 1; dyn < 4; ++dyn) {
        const GemmStats d = run(s, isa, dyn & 1, dyn & 2);
        CHECK(d.direct_calls == 1);
        CHECK(d.symbolic_bounded_plans == 0);
        CHECK(d.symbolic_exact_plans <= 1);  // 0 where an earlier case made the same plan
      }
    }
    // A shape no other test runs, so its kernels are new: they are charged to the budget.
    const GemmStats fresh = run({13, 61, 59}, isa, true, true);
    CHECK(fresh.symbolic_exact_plans == 1);
    CHECK(fresh.symbolic_exact_kernels >= 1);
    // With the budget spent: new extents take the bounded plans (all dims symbolic and small:
    // the packed path on one thread), counted; an exact problem is not affected.
    const int64_t spent = stats().symbolic_exact_kernels;
    const int64_t budget = set_symbolic_exact_kernel_budget(spent);
    for (Shape s : {Shape{14, 62, 58}, Shape{15, 63, 57}}) {
      INFO(s.M << "x" << s.N << "x" << s.K);
      const GemmStats d = run(s, isa, true, true);
      CHECK(d.symbolic_bounded_plans == 1);
      CHECK(d.symbolic_exact_plans == 0);
      CHECK(d.packed_calls == 1);
      CHECK(run(s, isa, false, false).direct_calls == 1);
    }
    CHECK(set_symbolic_exact_kernel_budget(budget) == spent);
  }
  CHECK_THROWS(set_symbolic_exact_kernel_budget(-1));
}

TEST_CASE("x86 gemm: a PackedB with symbolic dims is read in place where the exact plan would",
          "[x86][gemm][stats]") {
  // gemm_entry.cpp (BFrom::packed_or_in_place): gemm_prepacked with M symbolic and p.b given
  // reads B in place at extents whose exact plan reads it faster so (prepacked_b_pays false);
  // without p.b, always the packed copy.
  int variant = 0;
  for (Isa isa : supported_isas()) {
    INFO(isa_name(isa));
    int in_place = 0;  // extents read in place (4x256x256 at least, a direct kernel)
    for (Shape s : {Shape{4, 256, 256}, Shape{1, 256, 256}, Shape{100, 64, 64}, Shape{3, 17, 5},
                    Shape{64, 1024, 256}}) {
      INFO(s.M << "x" << s.N << "x" << s.K);
      for (bool b_given : {true, false}) {
        Case c(s, Layout::row_major, Layout::row_major, kEpilogueCycle[variant % 4],
               uint32_t(6400 + variant), 3);
        ++variant;
        GemmProblem p = c.problem();
        const bool pays = GemmPlan::make(p, isa, 2)->prepacked_b_pays();
        auto packed = pack_b(p.b, s.K, s.N, isa);
        p.dynamic_m = true;
        if (!b_given) p.b.data = nullptr;
        const GemmStats before = stats();
        gemm_prepacked(p, *packed, pool2());
        const GemmStats after = stats();
        CHECK(c.max_violation() <= 1.0);
        CHECK(after.prepacked_calls - before.prepacked_calls == (b_given && !pays ? 0 : 1));
        in_place += b_given && !pays;
      }
    }
    CHECK(in_place >= 1);
  }
}

TEST_CASE("x86 gemm: a symbolic M runs the direct kernels in blocks of rows", "[x86][gemm]") {
  // gemm_driver.cpp (plan_direct_blocks): with M symbolic (a batch that changes from call to
  // call) and B small, kernels over a fixed block of rows and one for the last block's rows, so
  // the set of kernels stays bounded; before, such problems packed A and B on every call (10000
  // 3-D points times a 3x3 matrix 3.6x slower than with M exact). Each against the reference on
  // pools of 1-3 threads and none, every epilogue, A and the residual padded.
  int variant = 0;
  for (Isa isa : supported_isas()) {
    INFO(isa_name(isa));
    for (int64_t N : {3, 16, 17, 64}) {
      for (int64_t K : {1, 3, 16, 65}) {
        for (int64_t M : {9, 27, 28, 29, 57, 1001}) {
          Case c({M, N, K}, variant % 2 ? Layout::padded : Layout::row_major, Layout::row_major,
                 kEpilogueCycle[variant % 4], uint32_t(6100 + variant), 3);
          GemmProblem p = c.problem();
          p.dynamic_m = true;
          auto plan = GemmPlan::make(p, isa, 1 + variant % 3);
          INFO(M << "x" << N << "x" << K << " epilogue " << variant % 4);
          REQUIRE_FALSE(plan->kernels().empty());
          CHECK(plan->kernels().at(0).name.rfind("direct_", 0) == 0);
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
    }
    // The kernels do not depend on M: over M = 9..200 at most one per remainder of the block
    // (and the block's own), and M and M + 2 blocks run the same kernels.
    std::set<std::string> names;
    auto kernels_of = [&](int64_t M) {
      Case c({M, 16, 16}, Layout::row_major, Layout::row_major, EpiKind{}, 6200);
      GemmProblem p = c.problem();
      p.dynamic_m = true;
      std::vector<std::string> out;
      for (const KernelInfo& k : GemmPlan::make(p, isa, 2)->kernels()) out.push_back(k.name);
      return out;
    };
    for (int64_t M = 9; M <= 200; ++M)
      for (const std::string& n : kernels_of(M)) names.insert(n);
    const int64_t block = direct_tiling(isa == Isa::avx512, int64_t{1} << 20, 16).rows_max;
    CHECK(int64_t(names.size()) <= block);
    CHECK(kernels_of(100) == kernels_of(100 + 2 * block));
    // An exact M keeps its own kernel (one call for all of C).
    Case exact({100, 16, 16}, Layout::row_major, Layout::row_major, EpiKind{}, 6201);
    CHECK(GemmPlan::make(exact.problem(), isa, 1)->kernels().at(0).name.find("M100N16") !=
          std::string::npos);
  }
}

TEST_CASE("x86 gemm: concurrent callers share the registry and plans", "[x86][gemm][threads]") {
  // Several threads compile and run the same cold shapes at once; every result must be right.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (Isa isa : supported_isas()) {
        for (Shape s : std::vector<Shape>{{37, 41, 43}, {3, 777, 90}, {150, 90, 333}}) {
          Case c(s, Layout::row_major, t % 2 ? Layout::transposed : Layout::row_major,
                 EpiKind{Activation::gelu_tanh, true, false, false}, uint32_t(t));
          c.run(kiln::ThreadPool::global(), isa);
          if (!(c.max_violation() <= 1.0)) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
}

TEST_CASE("x86 gemm: a thread's last plan serves only the identical problem",
          "[x86][gemm][threads]") {
  // Problems of one shape that differ in one plan-key field each (layouts, epilogue, ISA), in
  // turns: each call after the first misses the thread's last plan, each repeat hits it.
  struct Variant {
    Layout la, lb;
    EpiKind e;
  };
  const std::vector<Variant> variants = {
      {Layout::row_major, Layout::row_major, {}},
      {Layout::row_major, Layout::transposed, {}},
      {Layout::padded, Layout::row_major, {}},
      {Layout::row_major, Layout::row_major, {Activation::none, true, false, false}},
      {Layout::row_major, Layout::row_major, {Activation::none, false, true, false}},
      {Layout::row_major, Layout::row_major, {Activation::relu, false, false, true}},
      {Layout::row_major, Layout::row_major, {Activation::silu, false, false, false}},
  };
  for (Shape s : std::vector<Shape>{{16, 16, 16}, {23, 57, 91}, {3, 300, 40}}) {
    for (int round = 0; round < 2; ++round) {
      for (Isa isa : supported_isas()) {
        for (size_t v = 0; v < variants.size(); ++v) {
          for (int repeat = 0; repeat < 2; ++repeat) {
            INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " variant " << v);
            Case c(s, variants[v].la, variants[v].lb, variants[v].e, uint32_t(v * 10 + repeat));
            c.run(pool2(), isa);
            CHECK(c.max_violation() <= 1.0);
          }
        }
      }
    }
  }
  // Threads that each keep a last plan and exit: the plan's owner is released at thread exit
  // (under the sanitizer build a use after that release would be reported), and a new thread
  // starts without one.
  std::atomic<int> failures{0};
  for (int wave = 0; wave < 3; ++wave) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t, wave] {
        Case c({int64_t(5 + t), int64_t(7 + wave), 9}, Layout::row_major, Layout::row_major,
               EpiKind{}, uint32_t(t + 3 * wave));
        c.run(kiln::ThreadPool::global(), supported_isas().front());
        if (!(c.max_violation() <= 1.0)) failures.fetch_add(1);
      });
    }
    for (auto& th : threads) th.join();
  }
  CHECK(failures.load() == 0);
}

TEST_CASE("x86 gemm: packed edge tiles of fewer columns than rows (AVX2's narrow K loop)",
          "[x86][gemm][blocking]") {
  // AVX2's packed edge tiles of 1-4 columns and more rows run their K loop on A's micro-panel as
  // one vector per k-step, into a vector per column, transposed into rows at the end (their
  // columns pass through the red zone: [rsp-128]). Every N edge 1-5 (5 keeps the usual loop), M
  // edges 0-5, K blocks with each count of k-steps modulo the unroll (the last k-step runs after
  // the loops), with and without the epilogue; A transposed keeps the long K off the direct paths.
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; the narrow edge tiles test not run\n");
    return;
  }
  // (Short K takes the packed path only with a large C and A's rows unit-stride.)
  const int64_t ks[] = {1, 2, 3, 4, 5, 600, 601, 602, 603};
  int variant = 0;
  for (int64_t n = 1; n <= 5; ++n) {
    for (int64_t K : ks) {
      const Shape s =
          K < 600 ? Shape{1000 + variant % 6, 1008 + n, K} : Shape{60 + variant % 6, 96 + n, K};
      const bool epi = variant % 2 == 1;
      const EpiKind e{epi ? Activation::gelu : Activation::none, epi, epi, epi};
      INFO(s.M << "x" << s.N << "x" << s.K << " epilogue " << epi);
      Case c(s, K < 600 ? Layout::row_major : Layout::transposed, Layout::row_major, e,
             uint32_t(9900 + variant));
      const GemmProblem p = c.problem();
      auto plan = GemmPlan::make(p, Isa::avx2, 2);
      CHECK((listing_of(*plan).find("[rsp-128]") != std::string::npos) == (n <= 4));
      const GemmStats before = stats();
      plan->run(p, pool2());
      CHECK(stats().packed_calls == before.packed_calls + 1);
      CHECK(c.max_violation() <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: large blocking (threads split M or N, several MC, NC and K blocks)",
          "[x86][gemm][blocking]") {
  // Each thread owns a block of C and packs its own A (MC x KC) and B (KC x NC) blocks: shapes that
  // give a thread several MC blocks (split M), several NC blocks (split N), three K blocks (first,
  // middle, last kernels) and edges in M and N; on pools of 1, 2 and 3 threads; B packed from
  // row-major, reversed, padded and transposed layouts (the first micro-panel over a B panel
  // packs it from unit-stride rows) and prepacked.
  const std::vector<Shape> shapes = {
      {1100, 300, 1100},
      {128, 1100, 1030},
      {470, 77, 600},
      {200, 150, 2100},
      {600, 80, 2100}};  // one thread: KC 1024 (>= 512 rows per task), three K blocks
  kiln::ThreadPool pool1(1), pool3(3);
  kiln::ThreadPool* pools[] = {&pool1, &pool2(), &pool3};
  for (Isa isa : supported_isas()) {
    int variant = 0;
    for (const Shape& s : shapes) {
      for (kiln::ThreadPool* pool : pools) {
        const bool epi = variant % 2 == 1;
        const EpiKind e{epi ? Activation::gelu : Activation::none, epi, epi, epi};
        const Layout la = variant % 3 == 2 ? Layout::transposed : Layout::row_major;
        const Layout lb = variant % 4 == 3   ? Layout::transposed
                          : variant % 4 == 1 ? Layout::reversed_rows
                          : variant % 8 == 2 ? Layout::padded
                                             : Layout::row_major;
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads "
                           << pool->num_threads() << " A " << layout_name(la) << " B "
                           << layout_name(lb) << " epilogue " << epi);
        Case c(s, la, lb, e, uint32_t(7000 + variant));
        c.run(*pool, isa);
        CHECK(c.max_violation() <= 1.0);
        if (pool == &pool2()) {
          auto packed = pack_b(c.b_ref(), s.K, s.N, isa);
          c.run_prepacked(*pool, *packed);
          CHECK(c.max_violation() <= 1.0);
        }
        ++variant;
      }
    }
  }
}
