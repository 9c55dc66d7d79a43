// The dot path's kernels (dot_kernel.cpp) as code: generated for both ISAs on any host (their
// listings), and their run-time alignment of X's loads (k_align) over every distance off a
// vector's boundary, its masked steps kept within their floats' pages. Results of the dot path
// over its shapes: x86_dot_test.cpp.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"

#include <cstdio>
#include <regex>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

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
