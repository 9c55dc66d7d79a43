// Packing for the BLIS path: A blocks into MR-row panels laid out [kc][MR], B into NR-column
// panels laid out [K][NR] (zero-padded past N). Any strides; unit-stride layouts take fast paths.
// Also the per-thread scratch buffers the driver packs into.
#pragma once

#include "codegen/x86/gemm.h"

#include <cstddef>
#include <cstdint>

namespace kiln::x86 {

// Rows [i0, i0 + mc) and columns [k0, k0 + kc) of A; panel p starts at dst + p * MR * kc.
// The last panel holds mc % MR rows (the edge kernel reads no more). MR 14 (and NR 32 below) are
// the AVX-512 kernel's and take AVX-512 paths, MR 6 (NR 16) AVX2's: only for a CPU that has them.
void pack_a_block(const MatrixRef& a, int64_t i0, int64_t mc, int64_t k0, int64_t kc, int64_t MR,
                  float* dst);
// Columns [j0, j0 + nr) of B over all K rows, into dst[K][NR]; columns nr..NR-1 are zero.
void pack_b_panel(const MatrixRef& b, int64_t K, int64_t j0, int64_t nr, int64_t NR, float* dst);
// Columns [j0, j0 + ncols) of B over K rows as consecutive panels (panel q at dst + q * K * NR,
// the last one zero-padded).
void pack_b_block(const MatrixRef& b, int64_t K, int64_t j0, int64_t ncols, int64_t NR, float* dst);
// B[K, N] into a contiguous row-major copy (ld = N), for the direct kernel when B's columns are
// not unit-stride.
void copy_b_rowmajor(const MatrixRef& b, int64_t K, int64_t N, float* dst);
// C[i, j] = S[j, i] for i < M, j < N: the transpose of S (N x M, 1 <= N <= 8, rows ss apart) into
// C (rows ldc apart; only its first N columns are written).
void transpose_rows_into(const float* s, int64_t ss, int64_t N, int64_t M, float* c, int64_t ldc);
// As transpose_rows_into for any N >= 1: S's rows 8 at a time, over kTransposeBlockRows rows of
// C at a time (so that a block of C's rows stays in L1 while each group of S's rows fills its
// eight columns).
void transpose_into(const float* s, int64_t ss, int64_t N, int64_t M, float* c, int64_t ldc);
constexpr int64_t kTransposeBlockRows = 64;

// Bytes allocated past the end of every packing buffer (the scratch below and a PackedB): the
// packed kernels prefetch B's panel up to 16 k-steps ahead (2 KiB on AVX-512), past the last
// panel at its end, and a prefetch outside mapped memory can stall (blocking.h,
// b_prefetch_offset). AMD Zen 1, one thread, three pairs of processes each: 2048x32x512
// 1.01-1.04x with the slack, 512x32x512 x.T @ w and 300x40x300 within the noise.
inline constexpr size_t kPackPrefetchSlackBytes = 4096;

// A 64-byte aligned per-thread buffer of at least `floats` floats; `slot` keeps concurrent uses on
// one thread apart. Valid until the next call with the same slot on this thread.
enum class ScratchSlot : int {
  a_block,
  b_packed,
  b_panel,
  b_copy,
  k_partial,
  c_transposed,
  c_block,  // the stream kernels' over rows (KernelArgs::c_block)
  kCount
};
float* thread_scratch(ScratchSlot slot, size_t floats);

}  // namespace kiln::x86
