// Golden tests on the emitted instructions: the AVX-512 kernels use vfmadd231ps on zmm registers
// with an embedded {1to16} broadcast of A; the AVX2 kernels use vfmadd231ps on ymm registers.
// Also: every kernel reports its codegen time, and the registry generates a descriptor only once.
#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "codegen/x86/generators.h"
#include "codegen/x86/kernel_registry.h"
#include "jit/thread_pool.h"

#include <cstddef>
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

TEST_CASE("x86 listing: packed kernels prefetch the next call's C tile in the K loop",
          "[x86][listing]") {
  // packed_kernel.cpp: KernelArgs::c_next (args in rdi) is loaded into a register that the K
  // loop prefetches from and steps by ldc_bytes, a row at a time. Kernels are generated for
  // either ISA on any x86 host (only run where supported).
  const std::regex load_c_next(R"(mov (r\w+), \[rdi\+)" +
                               std::to_string(offsetof(KernelArgs, c_next)) + R"(\])");
  const std::string ldc = "[rdi+" + std::to_string(offsetof(KernelArgs, ldc_bytes)) + "]";
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    for (auto p : {shape_only(512, 512, 512), shape_only(2000, 2000, 64)}) {
      INFO(isa_name(isa) << " " << p.M << "x" << p.N << "x" << p.K);
      int packed = 0;
      for (const KernelInfo& k : kernels_for(p, isa)) {
        if (k.name.rfind("packed_", 0) != 0) continue;
        ++packed;
        INFO(k.name << "\n" << k.listing.substr(0, 6000));
        std::smatch m;
        REQUIRE(std::regex_search(k.listing, m, load_c_next));
        const std::string reg = m[1];
        const size_t at = size_t(m.position(0));
        CHECK(k.listing.find("prefetcht0 [" + reg + "]", at) != std::string::npos);
        CHECK(k.listing.find("add " + reg + ", " + ldc, at) != std::string::npos);
      }
      CHECK(packed > 0);
    }
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

TEST_CASE("x86 direct kernels: B's prefetches stay within the last K block", "[x86][listing]") {
  // The rule (generators.h): in the last K block no iteration prefetches a row past K, and no
  // iteration that could prefetch within K is left out; other blocks prefetch throughout.
  for (int64_t K = 17; K <= 600; ++K) {
    for (int64_t ahead = 1; ahead <= 16; ++ahead) {
      INFO("K " << K << " rows ahead " << ahead);
      const DirectPrefetchSteps last = direct_prefetch_steps(K, ahead, true);
      REQUIRE(last.iterations >= 0);
      REQUIRE(last.iterations <= K / kDirectUnrollK);
      REQUIRE_FALSE(last.remainder);
      if (last.iterations > 0) REQUIRE(last.iterations * kDirectUnrollK - 1 + ahead < K);
      if (last.iterations < K / kDirectUnrollK)
        REQUIRE((last.iterations + 1) * kDirectUnrollK - 1 + ahead >= K);
      const DirectPrefetchSteps inner = direct_prefetch_steps(K, ahead, false);
      REQUIRE(inner.iterations == K / kDirectUnrollK);
      REQUIRE(inner.remainder);
    }
    const DirectPrefetchSteps none = direct_prefetch_steps(K, 0, true);
    REQUIRE(none.iterations == 0);
    REQUIRE_FALSE(none.remainder);
  }
  // The kernels follow it: K = 66 in blocks, B's rows 8 ahead, 3 columns (one masked vector).
  // A middle block's kernel prefetches in its loop (4 k-steps) and its remainder (2); the last
  // block's in its first loop only: a second loop and the remainder do not.
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    KernelDesc d;
    d.kind = KernelKind::direct;
    d.isa = int64_t(isa);
    d.rows = 4;
    d.cols = 3;
    d.K = 66;
    d.a_rs = 66;
    d.a_cs = 1;
    d.b_rs = 1024;
    d.ldc = 3;
    d.b_prefetch = 8;
    auto count = [](const std::string& listing, const std::string& what) {
      int n = 0;
      for (size_t at = listing.find(what); at != std::string::npos; at = listing.find(what, at + 1))
        ++n;
      return n;
    };
    // The K loops count down rbx; B's running pointer is rax (A's next rows and C's next tile
    // are prefetched too: see the next test).
    auto prefetches = [&](const std::string& l) { return count(l, "prefetcht0 [rax"); };
    auto loops = [&](const std::string& l) { return count(l, "dec rbx"); };
    d.accumulate = 1;
    d.last = 0;
    const std::string& middle = kernel_listing(get_kernel(d));
    d.last = 1;
    const std::string& last = kernel_listing(get_kernel(d));
    INFO(isa_name(isa) << "\n" << middle.substr(0, 3000) << "\n" << last.substr(0, 3000));
    CHECK(prefetches(middle) == 4 + 2);
    CHECK(loops(middle) == 1);
    CHECK(prefetches(last) == 4);
    CHECK(loops(last) == 2);
  }
}

TEST_CASE("x86 direct kernels prefetch A's rows and C's next tile within their bounds",
          "[x86][listing]") {
  // Every block's prefetched rows stay within M, and are the next block's where enough follow.
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    for (int64_t M = 2; M <= 120; ++M) {
      const DirectTiling t = direct_tiling(isa == Isa::avx512, M, 64, 0);
      const int64_t blocks = (M + t.rows_max - 1) / t.rows_max, hi = (M + blocks - 1) / blocks;
      const int64_t n_hi = M - blocks * (hi - 1);
      int64_t row = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const bool first_group = b < n_hi;
        const int64_t rows = first_group ? hi : hi - 1;
        const int64_t left = first_group ? n_hi - b : blocks - b;
        const int64_t after = first_group ? (blocks - n_hi) * (hi - 1) : 0;
        const int64_t at = row + direct_prefetch_row(rows, left, after, hi);
        INFO(isa_name(isa) << " M " << M << " block " << b << " at row " << row);
        CHECK(at >= 0);
        CHECK(at + hi <= M);
        if (row + rows + hi <= M) CHECK(at == row + rows);
        row += rows;
      }
      CHECK(row == M);
    }
  }
  // The kernels: 28 x 80 x K, A's rows K floats apart, blocks of 6, 6, 6, 5, 5 on both ISAs
  // (AVX2 five 6 x 16 tiles, AVX-512 a 6 x 64 and a 6 x 16). The row offset is rbp, bytes from it
  // r15 (A's) or C's next column (from the column offset r10), A's running pointer r11, C's row
  // block rcx, the block loop's counter r12.
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    const DirectTiling tiling = direct_tiling(isa == Isa::avx512, 28, 80, 0);
    REQUIRE(tiling.rows_max == 6);
    const int64_t W = tiling.vectors * (isa == Isa::avx512 ? 16 : 8), nfull = 80 / W, rest = 80 % W;
    for (int64_t K : {16, 64, 67, 400}) {
      KernelDesc d;
      d.kind = KernelKind::direct;
      d.isa = int64_t(isa);
      d.rows = 28;
      d.cols = 80;
      d.K = K;
      d.a_rs = K;
      d.a_cs = 1;
      d.b_rs = 80;
      d.ldc = 80;
      d.last = 1;
      const std::string& l = kernel_listing(get_kernel(d));
      INFO(isa_name(isa) << " K " << K << "\n" << l.substr(0, 6000));
      std::vector<std::string> a_pf, c_pf;
      int other = 0;
      for (size_t at = l.find("prefetcht0 ["); at != std::string::npos;
           at = l.find("prefetcht0 [", at + 1)) {
        const std::string op = l.substr(at + 12, l.find(']', at) - at - 12);
        // The displacement after the two registers ("+disp", none for 0).
        auto disp = [&] { return op.size() == 7 ? std::string("0") : op.substr(8); };
        if (op.rfind("r11+r15", 0) == 0)
          a_pf.push_back(disp());
        else if (op.rfind("rcx+r15", 0) == 0)
          c_pf.push_back(disp());
        else
          ++other;
      }
      CHECK(other == 0);
      // C: each full tile with a tile after it prefetches that tile's `width` floats of its rows
      // (each 64 bytes and the last float): the peeled first tile (where A is prefetched) the
      // next tile's from column W; tile t of the loop from column (t + 1) W, clamped at 80 - W
      // (the loop's last: the rest tile's columns, or its own). Never past C's 80 columns.
      const bool a_on = K > 16 && 6 * K * 4 <= 8192;
      std::vector<std::string> want;
      for (int64_t rows : {6, 5}) {
        auto c_tile = [&](int64_t width) {
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t off = 0; off < width * 4; off += 64)
              want.push_back(std::to_string(i * 320 + off));
            want.push_back(std::to_string(i * 320 + width * 4 - 4));
          }
        };
        if (K <= 16) break;
        const int64_t peeled = a_on ? 1 : 0;
        if (peeled && (nfull > 1 || rest > 0)) {
          const int64_t width = nfull > 1 ? W : rest;
          CHECK(W + width <= 80);
          c_tile(width);
        }
        if (nfull > peeled && (nfull - peeled > 1 || rest > 0)) {
          for (int64_t t = peeled; t < nfull; ++t) CHECK(std::min((t + 1) * W, 80 - W) + W <= 80);
          CHECK(l.find("cmp r15, " + std::to_string((80 - W) * 4)) != std::string::npos);
          c_tile(W);
        }
      }
      CHECK(c_pf == want);
      // Fully unrolled K (a problem that small runs from cache), or a block's rows over 8 KiB
      // (the lines would leave L1 before their use): no prefetches of A.
      if (!a_on) {
        CHECK(a_pf.empty());
        CHECK(l.find("rbp") == std::string::npos);
        continue;
      }
      // Each block height's loop sets the row offset from its counter.
      CHECK(l.find("imul rbp, r12, 6") != std::string::npos);
      CHECK(l.find("add rbp, 4") != std::string::npos);  // 10 rows after, less 6
      CHECK(l.find("imul rbp, r12, 5") != std::string::npos);
      CHECK(l.find("add rbp, -6") != std::string::npos);
      CHECK(l.find("cmovg rbp, r15") != std::string::npos);
      // In each block height's first tile, k-step u of each K-loop iteration taking rows i with
      // i % kDirectUnrollK == u, and K's remainder steps (K = 67: 3) again.
      want.clear();
      auto a_steps = [&](int64_t steps) {
        for (int64_t u = 0; u < steps; ++u)
          for (int64_t i = u; i < 6; i += kDirectUnrollK)
            want.push_back(std::to_string(i * K * 4 + u * 4));
      };
      for (int g = 0; g < 2; ++g) a_steps(kDirectUnrollK), a_steps(K % kDirectUnrollK);
      CHECK(a_pf == want);
      // A transposed (its rows run down the columns): none of A.
      d.a_rs = 1;
      d.a_cs = 28;
      CHECK(kernel_listing(get_kernel(d)).find("prefetcht0 [r11") == std::string::npos);
    }
  }
}
