// Packing routines and per-thread scratch for the GEMM driver.
#include "codegen/x86/pack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::x86 {

void pack_a_block(const MatrixRef& a, int64_t i0, int64_t mc, int64_t k0, int64_t kc, int64_t MR,
                  float* dst) {
  const int64_t rs = a.row_stride, cs = a.col_stride;
  for (int64_t p = 0; p < mc; p += MR) {
    const int64_t rows = std::min(MR, mc - p);
    float* d = dst + p * kc;
    const float* base = a.data + (i0 + p) * rs + k0 * cs;
    if (cs == 1) {
      // Row-major: read each row contiguously, 8 columns at a time into the [k][MR] panel.
      int64_t k = 0;
      for (; k + 8 <= kc; k += 8) {
        for (int64_t r = 0; r < rows; ++r) {
          const float* s = base + r * rs + k;
          float* o = d + k * MR + r;
          for (int q = 0; q < 8; ++q) o[q * MR] = s[q];
        }
      }
      for (; k < kc; ++k)
        for (int64_t r = 0; r < rows; ++r) d[k * MR + r] = base[r * rs + k];
    } else if (rs == 1) {
      for (int64_t k = 0; k < kc; ++k) std::memcpy(d + k * MR, base + k * cs, size_t(rows) * sizeof(float));
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = 0; r < rows; ++r) d[k * MR + r] = base[r * rs + k * cs];
    }
  }
}

void pack_b_panel(const MatrixRef& b, int64_t K, int64_t j0, int64_t nr, int64_t NR, float* dst) {
  const int64_t rs = b.row_stride, cs = b.col_stride;
  const float* base = b.data + j0 * cs;
  if (cs == 1) {
    for (int64_t k = 0; k < K; ++k) {
      std::memcpy(dst + k * NR, base + k * rs, size_t(nr) * sizeof(float));
      std::fill(dst + k * NR + nr, dst + (k + 1) * NR, 0.0f);
    }
    return;
  }
  if (nr < NR)
    for (int64_t k = 0; k < K; ++k) std::fill(dst + k * NR + nr, dst + (k + 1) * NR, 0.0f);
  if (rs == 1) {
    // Transposed B (x @ w.T): each column is contiguous; write it down the panel.
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
      const int64_t k1 = std::min(K, k0 + 64);
      for (int64_t c = 0; c < nr; ++c) {
        const float* s = base + c * cs;
        for (int64_t k = k0; k < k1; ++k) dst[k * NR + c] = s[k];
      }
    }
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < nr; ++c) dst[k * NR + c] = base[k * rs + c * cs];
}

void copy_b_rowmajor(const MatrixRef& b, int64_t K, int64_t N, float* dst) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) dst[k * N + j] = b.data[k * b.row_stride + j * b.col_stride];
}

namespace {

struct ScratchBuffers {
  float* ptr[int(ScratchSlot::kCount)] = {};
  size_t cap[int(ScratchSlot::kCount)] = {};
  ~ScratchBuffers() {
    for (float* p : ptr) std::free(p);
  }
};

}  // namespace

float* thread_scratch(ScratchSlot slot, size_t floats) {
  thread_local ScratchBuffers buffers;
  const int s = int(slot);
  if (buffers.cap[s] < floats) {
    std::free(buffers.ptr[s]);
    const size_t bytes = (std::max<size_t>(floats, 16) * sizeof(float) + 63) / 64 * 64;
    buffers.ptr[s] = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!buffers.ptr[s]) throw std::bad_alloc();
    buffers.cap[s] = bytes / sizeof(float);
  }
  return buffers.ptr[s];
}

}  // namespace kiln::x86
