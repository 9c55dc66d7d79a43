// The packed path's K split (blocking.cpp: k_split_blocking): with small M and N and a long K,
// each thread packs and multiplies a run of K blocks over all of C, the tasks after the first
// into partial buffers that a second pass adds into C before the epilogue. Plans are made for a
// stated L2 size, so the choice does not depend on the host.
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

const CacheSizes kZen3{512 * 1024};

PackedBlocking blocking(Shape s, int threads, Isa isa = Isa::avx2, bool prepacked = false) {
  return packed_blocking(s.M, s.N, s.K, isa, threads, prepacked, kZen3);
}

}  // namespace

TEST_CASE("x86 blocking: K is split where the cost model prefers it", "[x86][blocking][k_split]") {
  // Measured faster split over K on the Zen 3 (2 threads): a few column panels (64x48: 2 + 1 of
  // them over N), one panel (16x16: one thread idle over N), small M and N with a long K.
  for (Shape s : {Shape{64, 48, 4096}, Shape{32, 32, 8192}, Shape{64, 64, 4096},
                  Shape{16, 16, 8192}, Shape{96, 64, 1024}}) {
    INFO(s.M << "x" << s.N << "x" << s.K);
    const PackedBlocking b = blocking(s, 2);
    CHECK(b.tk == 2);
    CHECK(b.tm * b.tn == 1);
    CHECK(b.npc % 2 == 0);
  }
  // 96x64x1024: the one-thread blocking's three K blocks of 344 become four of 256 (2 + 2).
  const PackedBlocking odd = blocking({96, 64, 1024}, 2);
  CHECK(odd.npc == 4);
  CHECK(odd.KC == 256);
  // Every thread takes a share while K gives each at least 512.
  CHECK(blocking({64, 64, 4096}, 8).tk == 8);
  CHECK(blocking({64, 64, 2048}, 8).tk == 4);
  // Not split: wide or tall C (measured 0.95-0.98x split), K under 1024, one thread, B prepacked.
  for (Shape s : {Shape{1024, 256, 1024}, Shape{48, 4096, 1024}, Shape{128, 256, 1024},
                  Shape{2048, 2048, 2048}, Shape{64, 64, 1000}}) {
    INFO(s.M << "x" << s.N << "x" << s.K);
    CHECK(blocking(s, 2).tk == 1);
  }
  CHECK(blocking({64, 64, 4096}, 1).tk == 1);
  CHECK(blocking({64, 64, 4096}, 2, Isa::avx2, true).tk == 1);
  // The partial buffers stay within one core's L2: 128x128 takes 64 KiB each, 8 of them on 16
  // threads; a big C is never split, whatever the threads (1 GB of partials at 4096^2 on 16).
  CHECK(blocking({128, 128, 65536}, 16).tk == 9);
  CHECK(k_split_tasks(128, 128, 16, kZen3) == 9);
  CHECK(blocking({4096, 4096, 8192}, 16).tk == 1);
  CHECK(blocking({2048, 16384, 4096}, 8).tk == 1);
}

TEST_CASE("x86 gemm: a K split adds its partial sums and applies the epilogue once",
          "[x86][gemm][k_split]") {
  if (supported_isas().empty()) {
    std::printf("SKIPPED: this CPU runs no kiln x86 kernels; K split test not run\n");
    return;
  }
  // Edge tiles in M and N for both ISAs' tiles (100 = 16 * 6 + 4 = 7 * 14 + 2, 109 = 6 * 16 + 13
  // = 3 * 32 + 13), a shorter last K block (2100 over 6 blocks of 352), a few rows against a
  // wider C (the few_rows KC on AVX2). All past direct_k's rule (AVX2: more than 100 columns;
  // AVX-512: C over 16384 elements with N over 128), so the packed path's split runs.
  const std::vector<Shape> avx2_shapes = {
      {100, 109, 4096}, {70, 110, 2100}, {24, 200, 3000}, {40, 150, 3000}};
  const std::vector<Shape> avx512_shapes = {
      {100, 170, 2048}, {70, 270, 2100}, {50, 340, 2048}, {64, 270, 2048}};
  const Layout layouts[] = {Layout::row_major, Layout::transposed, Layout::strided, Layout::padded,
                            Layout::reversed_rows};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : isa == Isa::avx2 ? avx2_shapes : avx512_shapes) {
      for (int threads : {2, 3}) {
        const PackedBlocking b = blocking(s, threads, isa);
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads " << threads
                           << " tk " << b.tk << " KC " << b.KC << " blocks " << b.npc);
        REQUIRE(b.tk == threads);  // otherwise this test would not test the split
        for (Layout la : layouts) {
          const Layout lb = layouts[(variant + variant / 5 + 1) % 5];
          const EpiKind e = kEpilogueCycle[variant % 4];
          Case c(s, la, lb, e, uint32_t(8100 + variant));
          auto plan = GemmPlan::make(c.problem(), isa, threads, false, kZen3);
          INFO("A " << layout_name(la) << " B " << layout_name(lb) << " epilogue " << variant % 4);
          for (const KernelInfo& k : plan->kernels()) REQUIRE(k.name.rfind("packed_", 0) == 0);
          // On pools of other sizes than the plan's, and none: every K range still runs once,
          // and the partials are added once.
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: small batched problems with a long K match the reference",
          "[x86][gemm][k_split]") {
  // A K split on two threads alone (direct_k on AVX2); a batch runs each item on one thread, with
  // a plan made for one thread (a plan for two would be as correct there, only slower).
  kiln::ThreadPool pool2(2);
  int seed = 0;
  for (Isa isa : supported_isas()) {
    for (bool a_batched : {true, false}) {
      BatchedCase c({16, 16, 4096}, 5, a_batched, true,
                    EpiKind{Activation::gelu, true, false, true}, uint32_t(8300 + seed++));
      c.run(pool2, isa);
      INFO(isa_name(isa) << " A batched " << a_batched);
      CHECK(c.max_violation() <= 1.0);
    }
  }
}

namespace {

// The K block lengths of a plan's direct kernels over all of an M x N C, in the plan's order;
// empty if it runs any kernel other than those and the packed epilogue ones.
std::vector<int64_t> direct_k_blocks(const GemmPlan& plan, const Shape& s, Isa isa = Isa::avx2) {
  std::vector<int64_t> ks;
  const std::string prefix = std::string("direct_") + isa_name(isa) + "_M" + std::to_string(s.M) +
                             "N" + std::to_string(s.N) + "K";
  for (const KernelInfo& k : plan.kernels()) {
    if (k.name.rfind("packed_", 0) == 0 && k.name.find("_acc") != std::string::npos) continue;
    if (k.name.rfind(prefix, 0) != 0) return {};
    ks.push_back(std::stoll(k.name.substr(prefix.size())));
  }
  return ks;
}

}  // namespace

TEST_CASE("x86 gemm: direct_k takes a small C with a long K, on AVX2", "[x86][gemm][k_split]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; direct_k selection test not run\n");
    return;
  }
  auto blocks = [](Shape s, int threads, Layout la = Layout::row_major) {
    Case c(s, la, Layout::row_major, EpiKind{Activation::relu, true, false, false}, 1);
    return direct_k_blocks(*GemmPlan::make(c.problem(), Isa::avx2, threads, false, kZen3), s);
  };
  using Ks = std::vector<int64_t>;
  // 8192 = 16 blocks of 512, 8 per thread; each thread's first block has its own kernel, the
  // other threads' write a partial buffer (another C stride): K 512 listed for each.
  CHECK(blocks({16, 16, 8192}, 2) == Ks{512, 512, 512, 512});
  CHECK(blocks({16, 16, 8192}, 1) == Ks{512, 512});
  // 2101 = 34 blocks (a multiple of the threads, of at most 64 rows: 64 x 45 of B in 16 KiB) of
  // 61, the last 88.
  CHECK(blocks({37, 45, 2101}, 2) == Ks{61, 61, 61, 61, 88});
  // Blocks of 512 halved while B's block is over 16 KiB, from K 2048 on, for N over 16.
  CHECK(blocks({64, 48, 4096}, 2) == Ks{64, 64, 64, 64});
  CHECK(blocks({64, 32, 4096}, 1) == Ks{128, 128});
  CHECK(blocks({64, 48, 1024}, 1) == Ks{512, 512});
  CHECK(blocks({200, 24, 3000}, 2).size() > 0);  // N <= 32: up to 16384 elements of C
  CHECK(blocks({64, 64, 1024}, 2).size() > 0);
  CHECK(blocks({64, 64, 1024}, 4).size() > 0);
  // Up to 100 columns, C up to 16384 elements.
  CHECK(blocks({96, 96, 4096}, 2).size() > 0);
  CHECK(blocks({160, 100, 2048}, 2).size() > 0);
  // Not: C too wide or too big, K under 1024 or 256 per thread, rows of B a page apart.
  CHECK(blocks({128, 128, 4096}, 2).empty());
  CHECK(blocks({170, 100, 4096}, 2).empty());
  CHECK(blocks({16, 256, 4096}, 2).empty());
  CHECK(blocks({1024, 32, 4096}, 2).empty());
  CHECK(blocks({64, 64, 1000}, 2).empty());
  CHECK(blocks({64, 64, 1024}, 8).empty());
  // Many threads: K 66305 over 259 blocks (one a thread) of 256, the last 257 (rounded up, 257
  // each would have left the last block at -1 of K).
  CHECK(blocks({16, 16, 66305}, 259) == Ks{256, 256, 257});
  {
    Case c({16, 16, 66305}, Layout::row_major, Layout::row_major, EpiKind{}, 2);
    auto plan = GemmPlan::make(c.problem(), Isa::avx2, 259, false, kZen3);
    plan->run_on(c.problem(), nullptr);
    CHECK(c.max_violation() <= 1.0);
  }
  // A transposed A as A's rows, past half of L2 (here 262144 bytes); within it, where M makes
  // more than one row block, direct_rows first. A strided both ways: never.
  CHECK(blocks({64, 64, 4096}, 2, Layout::transposed) == blocks({64, 64, 4096}, 2));
  CHECK(blocks({64, 64, 4096}, 2, Layout::transposed_padded).size() > 0);
  CHECK(blocks({32, 16, 2048}, 2).size() > 0);
  {
    Case c({32, 16, 2048}, Layout::transposed, Layout::row_major, EpiKind{}, 1);
    const auto kernels = GemmPlan::make(c.problem(), Isa::avx2, 2, false, kZen3)->kernels();
    REQUIRE(kernels.size() == 1);  // direct_rows: two chunks of 16 rows, one kernel
    CHECK(kernels[0].name.rfind("direct_avx2_M16N16K2048_", 0) == 0);
  }
  CHECK(blocks({64, 64, 4096}, 2, Layout::strided).empty());
}

TEST_CASE("x86 gemm: direct_k on AVX-512 takes C up to 16384 elements, or 32768 up to 128 columns",
          "[x86][gemm][k_split]") {
  // Plans on any host (an AVX-512 kernel is generated anywhere); run where the CPU has it.
  auto blocks = [](Shape s, int threads) {
    Case c(s, Layout::row_major, Layout::row_major, EpiKind{Activation::relu, true, false, false},
           1);
    return direct_k_blocks(*GemmPlan::make(c.problem(), Isa::avx512, threads, false, kZen3), s,
                           Isa::avx512);
  };
  using Ks = std::vector<int64_t>;
  CHECK(blocks({16, 16, 8192}, 2) == Ks{512, 512, 512, 512});
  CHECK(blocks({64, 48, 4096}, 2) == Ks{64, 64, 64, 64});
  CHECK(blocks({128, 128, 4096}, 2).size() > 0);
  CHECK(blocks({64, 256, 1024}, 2).size() > 0);
  CHECK(blocks({256, 128, 4096}, 2).size() > 0);
  CHECK(blocks({2048, 16, 4096}, 2).size() > 0);
  CHECK(blocks({128, 256, 4096}, 2).empty());  // 32768 elements, 256 columns
  CHECK(blocks({512, 128, 4096}, 2).empty());  // 65536 elements
  CHECK(blocks({16, 512, 4096}, 2).empty());   // over 256 columns
  // K from 256 (128 per thread); with up to 12 rows from 600 (300 per thread).
  CHECK(blocks({128, 128, 1000}, 2).size() > 0);
  CHECK(blocks({128, 128, 256}, 2).size() > 0);
  CHECK(blocks({128, 128, 255}, 2).empty());
  CHECK(blocks({128, 128, 300}, 4).empty());
  CHECK(blocks({13, 256, 300}, 2).size() > 0);
  CHECK(blocks({12, 256, 600}, 2).size() > 0);
  CHECK(blocks({12, 256, 599}, 2).empty());
  CHECK(blocks({12, 256, 600}, 3).empty());
  // Those short K blocks against the reference, where the CPU runs AVX-512: every epilogue,
  // A's rows padded or reversed, on every pool.
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; direct_k with K under 1024 not run\n");
    return;
  }
  int variant = 0;
  for (Shape s :
       std::vector<Shape>{{100, 64, 300}, {13, 200, 600}, {128, 128, 256}, {37, 45, 999}}) {
    for (Layout la : {Layout::row_major, Layout::padded, Layout::reversed_rows}) {
      Case c(s, la, Layout::row_major, kEpilogueCycle[variant % 4], uint32_t(8700 + variant));
      auto plan = GemmPlan::make(c.problem(), Isa::avx512, 2, false, kZen3);
      INFO(s.M << "x" << s.N << "x" << s.K << " A " << layout_name(la));
      REQUIRE_FALSE(direct_k_blocks(*plan, s, Isa::avx512).empty());
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      ++variant;
    }
  }
}

TEST_CASE("x86 gemm: direct_k adds its partial sums and applies the epilogue once",
          "[x86][gemm][k_split]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; direct_k differential test not run\n");
    return;
  }
  // Edges of the epilogue's tiles (37 rows, 45 columns), a short last K block (2101), tall C
  // with N <= 32, 9 rows (above the skinny path's 8); A's rows or (transposed) its columns runs.
  const std::vector<Shape> shapes = {
      {16, 16, 8192}, {37, 45, 2101}, {200, 24, 3000}, {9, 100, 4096}};
  const Layout a_layouts[] = {Layout::row_major,     Layout::padded,     Layout::reversed_rows,
                              Layout::broadcast_row, Layout::transposed, Layout::transposed_padded};
  const Layout b_layouts[] = {Layout::row_major, Layout::padded, Layout::reversed_rows};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (int threads : {1, 2, 3}) {
        for (Layout la : a_layouts) {
          const Layout lb = b_layouts[variant % 3];
          const EpiKind e = kEpilogueCycle[variant % 4];
          Case c(s, la, lb, e, uint32_t(8500 + variant));
          auto plan = GemmPlan::make(c.problem(), isa, threads, false, kZen3);
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads " << threads
                             << " A " << layout_name(la) << " B " << layout_name(lb) << " epilogue "
                             << variant % 4);
          // else this would not test direct_k
          REQUIRE_FALSE(direct_k_blocks(*plan, s, isa).empty());
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
    }
  }
}

TEST_CASE("x86 gemm: a constant B is worth packing once only where the plan would pack it",
          "[x86][gemm][k_split]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; prepacked_b_pays test not run\n");
    return;
  }
  auto pays = [](Shape s, Layout lb, int threads) {
    Case c(s, Layout::row_major, lb, EpiKind{}, 1);
    return GemmPlan::make(c.problem(), Isa::avx2, threads, false, kZen3)->prepacked_b_pays();
  };
  // In place: direct, direct_rows, direct_k, the packed path's K split, stream (GEMV).
  CHECK_FALSE(pays({1, 1024, 1024}, Layout::row_major, 2));
  CHECK_FALSE(pays({1, 4096, 4096}, Layout::row_major, 1));
  CHECK_FALSE(pays({4, 12, 8}, Layout::row_major, 2));
  CHECK_FALSE(pays({100, 100, 100}, Layout::row_major, 2));
  CHECK_FALSE(pays({16, 16, 8192}, Layout::row_major, 2));
  CHECK_FALSE(pays({100, 45, 4096}, Layout::row_major, 1));
  CHECK_FALSE(pays({100, 109, 4096}, Layout::row_major, 2));
  CHECK_FALSE(pays({1, 12, 8}, Layout::transposed, 2));  // dot (x @ w.T, one row)
  // Packed on every call, or copied (a transposed B under the direct kernel), or skinny.
  CHECK(pays({4, 2048, 1024}, Layout::row_major, 2));
  CHECK(pays({128, 4096, 1024}, Layout::row_major, 2));
  CHECK(pays({100, 109, 4096}, Layout::row_major, 1));  // one thread: no K split
  CHECK(pays({12, 12, 8}, Layout::transposed, 2));
  // dot over 3-8 rows of A (two a pass), 128 columns or more
  CHECK(pays({4, 128, 8}, Layout::transposed, 2));
  CHECK_FALSE(pays({4, 127, 8}, Layout::transposed, 2));
  CHECK_FALSE(pays({2, 128, 8}, Layout::transposed, 2));
  CHECK(pays({8, 1000, 1000}, Layout::row_major, 2));
}

TEST_CASE(
    "x86 gemm: AVX-512 reads a constant B in place on skinny up to 16 rows within half of L2, "
    "and packs it for direct_k over a wide C and a short K",
    "[x86][gemm][k_split]") {
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512; its prepacked_b_pays rules not tested\n");
    return;
  }
  const CacheSizes xeon{2 * 1024 * 1024};
  struct Expect {
    Shape s;
    bool pays;
  };
  // Skinny (up to 16 rows read in place, B's bytes against 1 MiB), then direct_k (wide C: 192
  // columns or more and K up to 1024).
  for (const Expect& e :
       {Expect{{8, 256, 256}, false}, Expect{{8, 512, 512}, false}, Expect{{16, 512, 512}, false},
        Expect{{8, 1024, 1024}, true}, Expect{{24, 128, 128}, true}, Expect{{28, 512, 512}, true},
        Expect{{4, 1024, 1024}, true}, Expect{{32, 256, 256}, true}, Expect{{64, 256, 512}, true},
        Expect{{32, 256, 1024}, true}, Expect{{16, 128, 4096}, false},
        Expect{{64, 128, 512}, false}, Expect{{8, 256, 2048}, false}}) {
    INFO(e.s.M << "x" << e.s.N << "x" << e.s.K);
    Case c(e.s, Layout::row_major, Layout::row_major, EpiKind{}, 1);
    const auto plan = GemmPlan::make(c.problem(), Isa::avx512, 2, false, xeon);
    const std::string first = plan->kernels().at(0).name;
    // Both paths run direct kernels (skinny in K blocks too, so the names do not tell them apart).
    REQUIRE(first.rfind("direct_avx512_", 0) == 0);
    CHECK(plan->prepacked_b_pays() == e.pays);
  }
}
