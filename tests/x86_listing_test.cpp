// Golden tests on the emitted instructions: the AVX-512 kernels use vfmadd231ps on zmm registers
// with an embedded {1to16} broadcast of A; the AVX2 kernels use vfmadd231ps on ymm registers.
// Also: every kernel reports its codegen time, and the registry generates a descriptor only once.
#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

using namespace kiln::x86;

namespace {

GemmProblem shape_only(int64_t M, int64_t N, int64_t K) {
  static std::vector<float> dummy(1);
  GemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.a = MatrixRef{dummy.data(), K, 1};
  p.b = MatrixRef{dummy.data(), N, 1};
  p.c = dummy.data();
  p.ldc = N;
  return p;
}

}  // namespace

TEST_CASE("x86 listing: AVX-512 FMA on zmm with a {1to16} broadcast operand", "[x86][listing]") {
  if (!isa_supported(Isa::avx512)) {
    std::printf("SKIPPED: this CPU has no AVX-512F; AVX-512 listing test not run\n");
    return;
  }
  for (auto p : {shape_only(16, 16, 16), shape_only(512, 512, 512)}) {
    const std::string listing = listing_for(p, Isa::avx512);
    INFO(listing.substr(0, 4000));
    CHECK(std::regex_search(
        listing, std::regex(R"(vfmadd231ps zmm\d+, zmm\d+, dword ptr \[[^\]]+\] ?\{1to16\})")));
    CHECK(listing.find("ymm") == std::string::npos);
  }
}

TEST_CASE("x86 listing: AVX2 FMA on ymm", "[x86][listing]") {
  if (!isa_supported(Isa::avx2)) {
    std::printf("SKIPPED: this CPU has no AVX2+FMA; AVX2 listing test not run\n");
    return;
  }
  for (auto p : {shape_only(16, 16, 16), shape_only(512, 512, 512)}) {
    const std::string listing = listing_for(p, Isa::avx2);
    INFO(listing.substr(0, 4000));
    CHECK(std::regex_search(listing, std::regex(R"(vfmadd231ps ymm\d+, ymm\d+, ymm\d+)")));
    CHECK(listing.find("zmm") == std::string::npos);
  }
}

TEST_CASE("x86 kernels: codegen time is reported, each descriptor is generated once",
          "[x86][listing]") {
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    if (!isa_supported(isa)) continue;
    auto p = shape_only(300, 200, 1000);
    p.epi.act = Activation::gelu;
    const auto first = kernels_for(p, isa);
    REQUIRE(!first.empty());
    const int64_t generated = stats().kernels_generated;
    const auto second = kernels_for(p, isa);
    CHECK(stats().kernels_generated == generated);
    for (const KernelInfo& k : first) {
      INFO(k.name);
      CHECK(k.codegen_ms > 0);
      CHECK(k.code_bytes > 0);
      CHECK(!k.listing.empty());
    }
  }
}
