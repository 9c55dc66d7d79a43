// The packing routines of the BLIS path (pack.h) against their layouts written out element by
// element: every fast path (AVX2's 6-row transpose, AVX-512's 14-row gather, the fixed-size copies
// of a transposed A, B's 16- and 32-column rows) and the general strided copy, over block sizes
// that leave remainders in rows, columns and the 8-column steps, at offsets into the matrix.
#include <catch2/catch.hpp>

#include "codegen/x86/gemm.h"
#include "codegen/x86/pack.h"

#include <cstdint>
#include <string>
#include <vector>

using namespace kiln::x86;

namespace {

// A rows x cols matrix with distinct values, stored with the given layout inside a larger buffer.
struct Strided {
  std::vector<float> storage;
  MatrixRef ref;
  float at(int64_t i, int64_t j) const { return ref.data[i * ref.row_stride + j * ref.col_stride]; }
};

enum class Layout { row_major, transposed, strided };

const char* layout_name(Layout l) {
  return l == Layout::row_major ? "row-major" : l == Layout::transposed ? "transposed" : "strided";
}

Strided make_matrix(int64_t rows, int64_t cols, Layout layout) {
  Strided m;
  // Padding between rows/columns, so that reading past a run would pick up a wrong value.
  const int64_t rs = layout == Layout::row_major    ? cols + 3
                     : layout == Layout::transposed ? 1
                                                    : 2 * cols + 1;
  const int64_t cs = layout == Layout::row_major ? 1 : layout == Layout::transposed ? rows + 5 : 2;
  const int64_t extent = (rows - 1) * rs + (cols - 1) * cs + 1;
  m.storage.assign(size_t(extent + 16), -1e9f);
  m.ref = MatrixRef{m.storage.data(), rs, cs};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      m.storage[size_t(i * rs + j * cs)] = float(i * 1000 + j) + 0.5f;
  return m;
}

// MR 14 and NR 32 are the AVX-512 kernel's and take AVX-512 fast paths (pack.h).
bool runnable(int64_t panel_size) {
  if (panel_size != 14 && panel_size != 32) return true;
  static const bool ok = [] {
    if (!isa_supported(Isa::avx512))
      WARN("x86 pack: this CPU has no AVX-512: MR 14 and NR 32 (AVX-512's panels) not tested");
    return isa_supported(Isa::avx512);
  }();
  return ok;
}

}  // namespace

TEST_CASE("x86 pack: A blocks in MR-row panels match the [kc][MR] layout", "[x86][pack]") {
  for (int64_t MR : {int64_t{6}, int64_t{14}}) {
    if (!runnable(MR)) continue;
    for (Layout layout : {Layout::row_major, Layout::transposed, Layout::strided}) {
      for (int64_t mc : {1, 5, 6, 7, 13, 14, 15, 29, 42}) {
        for (int64_t kc : {1, 7, 8, 9, 16, 23, 64, 67}) {
          const int64_t i0 = 3, k0 = 5;
          const Strided a = make_matrix(i0 + mc, k0 + kc, layout);
          const int64_t panels = (mc + MR - 1) / MR;
          const float canary = -3.25f;
          std::vector<float> dst(size_t(panels * MR * kc + 8), canary);
          pack_a_block(a.ref, i0, mc, k0, kc, MR, dst.data());
          INFO("MR " << MR << " " << layout_name(layout) << " mc " << mc << " kc " << kc);
          int64_t wrong = 0;
          for (int64_t p = 0; p < panels; ++p) {
            const int64_t rows = std::min(MR, mc - p * MR);
            for (int64_t k = 0; k < kc; ++k)
              for (int64_t r = 0; r < rows; ++r)
                wrong += dst[size_t(p * MR * kc + k * MR + r)] != a.at(i0 + p * MR + r, k0 + k);
          }
          CHECK(wrong == 0);
          // Nothing written past the last panel's rows of its last k.
          const int64_t last_rows = mc - (panels - 1) * MR;
          const size_t end = size_t((panels - 1) * MR * kc + (kc - 1) * MR + last_rows);
          for (size_t q = end; q < dst.size(); ++q) CHECK(dst[q] == canary);
        }
      }
    }
  }
}

TEST_CASE("x86 pack: B blocks in NR-column panels match the [K][NR] layout, zero-padded",
          "[x86][pack]") {
  for (int64_t NR : {int64_t{16}, int64_t{32}}) {
    if (!runnable(NR)) continue;
    for (Layout layout : {Layout::row_major, Layout::transposed, Layout::strided}) {
      for (int64_t ncols : {1, 15, 16, 17, 32, 33, 70}) {
        for (int64_t K : {1, 7, 8, 9, 30}) {
          const int64_t j0 = 2;
          const Strided b = make_matrix(K, j0 + ncols, layout);
          const int64_t panels = (ncols + NR - 1) / NR;
          std::vector<float> dst(size_t(panels * K * NR + 8), -3.25f);
          pack_b_block(b.ref, K, j0, ncols, NR, dst.data());
          INFO("NR " << NR << " " << layout_name(layout) << " ncols " << ncols << " K " << K);
          int64_t wrong = 0;
          for (int64_t q = 0; q < panels; ++q)
            for (int64_t k = 0; k < K; ++k)
              for (int64_t c = 0; c < NR; ++c) {
                const int64_t j = q * NR + c;
                const float want = j < ncols ? b.at(k, j0 + j) : 0.0f;
                wrong += dst[size_t(q * K * NR + k * NR + c)] != want;
              }
          CHECK(wrong == 0);
          for (size_t q = size_t(panels * K * NR); q < dst.size(); ++q) CHECK(dst[q] == -3.25f);
        }
      }
    }
  }
}
