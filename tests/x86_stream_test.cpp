// The GEMV stream path (M = 1): split over N in chunks, or, where fewer chunks than threads cover
// N, over K (gemm_driver.cpp, stream_k_tasks): each task streams a run of B's rows into C or a
// partial row, and a second pass adds the partial rows and applies the epilogue once.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"

#include <string>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

// The kernels of a plan by kind: stream kernels, and packed ones (only a K split's epilogue pass
// uses packed kernels on this path).
struct Kinds {
  int stream = 0, packed = 0;
};
Kinds kinds_of(const GemmPlan& plan) {
  Kinds k;
  for (const KernelInfo& info : plan.kernels()) {
    if (info.name.rfind("stream_", 0) == 0) ++k.stream;
    if (info.name.rfind("packed_", 0) == 0) ++k.packed;
  }
  return k;
}

}  // namespace

TEST_CASE("x86 gemm: the stream path splits K where few chunks cover N", "[x86][gemm][stream]") {
  for (Isa isa : supported_isas()) {
    auto plan_for = [&](Shape s, int threads, EpiKind e, bool dynamic_m = false) {
      Case c(s, Layout::row_major, Layout::row_major, e, 1);
      GemmProblem p = c.problem();
      p.dynamic_m = dynamic_m;
      return GemmPlan::make(p, isa, threads);
    };
    const EpiKind gelu_bias{Activation::gelu, true, false, false};
    // One chunk of 1024 columns, two K runs: the epilogue comes after the sum (packed kernels).
    const Kinds split = kinds_of(*plan_for({1, 1024, 1024}, 2, gelu_bias));
    CHECK(split.stream >= 1);
    CHECK(split.packed >= 1);
    // One thread, or too few elements of B to split (100 x 256 is under 32 Ki; with M symbolic
    // the direct kernel does not take it): the stream kernels apply the epilogue themselves.
    CHECK(kinds_of(*plan_for({1, 1024, 1024}, 1, gelu_bias)).packed == 0);
    const Kinds small = kinds_of(*plan_for({1, 256, 100}, 2, gelu_bias, true));
    CHECK(small.stream >= 1);
    CHECK(small.packed == 0);
    // As many chunks as threads (8192 columns in two of 4096): split over N only.
    CHECK(kinds_of(*plan_for({1, 8192, 512}, 2, gelu_bias)).packed == 0);
  }
}

TEST_CASE("x86 gemm: the stream path's K split matches the reference", "[x86][gemm][stream]") {
  // Odd N (a masked edge in each chunk and in the epilogue's last panel), K runs of unequal
  // length, N over 4096 (two chunks, each split over K on 4 threads), a short K for its tasks,
  // a GEMV within the direct kernel's small volume.
  const std::vector<Shape> shapes = {{1, 1024, 1024}, {1, 1001, 777}, {1, 6000, 300},
                                     {1, 333, 4099},  {1, 4096, 130}, {1, 517, 300}};
  const Layout a_layouts[] = {Layout::row_major, Layout::transposed, Layout::strided,
                              Layout::reversed_rows};
  // The stream path reads B's rows forward (a reversed B takes another path).
  const Layout b_layouts[] = {Layout::row_major, Layout::padded};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (int threads : {2, 3, 4}) {
        for (Layout la : a_layouts) {
          const Layout lb = b_layouts[variant / 4 % 2];
          const EpiKind e = kEpilogueCycle[variant % 4];
          Case c(s, la, lb, e, uint32_t(9700 + variant));
          auto plan = GemmPlan::make(c.problem(), isa, threads);
          INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads " << threads
                             << " A " << layout_name(la) << " B " << layout_name(lb) << " epilogue "
                             << variant % 4);
          REQUIRE(kinds_of(*plan).stream >= 1);
          CHECK(worst_on_every_pool(*plan, c) <= 1.0);
          ++variant;
        }
      }
    }
  }
}
