// The GEMM code generators. Each emits one complete function of type KernelFn
// for a descriptor into an asmjit assembler; kernel_registry.cpp owns the CodeHolder and runtime.
#pragma once

#include "codegen/x86/kernel_registry.h"

#include <asmjit/x86.h>

#include <algorithm>
#include <cstdint>

namespace kiln::x86 {

// Register-blocked microkernel over packed panels (packed_kernel.cpp).
void emit_packed_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Unpacked kernel for exact M, N, K and strides (direct_kernel.cpp).
void emit_direct_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Streaming GEMV (M = 1) over a chunk of columns (stream_kernel.cpp).
void emit_stream_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Streaming over a few rows of C (2 to kStreamMaxRows) and a chunk of columns
// (stream_rows_kernel.cpp).
void emit_stream_rows_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Dot-product GEMV over a chunk of rows of X, each row along K (dot_kernel.cpp).
void emit_dot_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);

// The stream kernels over a few rows of C: at most this many rows (each row group's pass
// rereads B's four rows from L1; see stream_rows_for in stream_path.cpp).
inline constexpr int64_t kStreamMaxRows = 12;
// The row stride, in floats, of such a kernel's block of C (KernelArgs::c_block) for a chunk of
// `cols` columns: whole lines and one more, so that its rows fall into different L1 sets (C's own
// rows, and B's, are often a multiple of 4 KiB apart: all in the same few sets).
inline int64_t stream_rows_block_ld(int64_t cols) { return (cols + 15) / 16 * 16 + 16; }
// Whether such a kernel's displacements fit 32 bits: B's four rows of a pass and the chunk, C's
// and the residual's rows, A's rows and four of its columns (strides in floats).
inline bool stream_rows_reach_fits(int64_t rows, int64_t cols, int64_t a_rs, int64_t a_cs,
                                   int64_t b_rs, int64_t ldc, int64_t ld_res) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  return 4 * (4 * b_rs + cols + 16) < kLimit && 4 * (rows * ldc + cols) < kLimit &&
         4 * (rows * a_rs + 4 * a_cs) < kLimit && 4 * rows * ld_res < kLimit;
}

// The direct kernel's register tile for a shape: rows per block and vectors per column tile.
struct DirectTiling {
  int vectors = 1;  // column tile width in vectors
  int rows_max = 1;
};
// rows_cap > 0: at most that many rows per block (KernelDesc::rows_cap).
DirectTiling direct_tiling(bool avx512, int64_t M, int64_t N, int64_t rows_cap = 0);

// The direct kernel's prefetch of rows ahead (direct_kernel.cpp): a block of `rows` rows with
// count_left blocks of that height left (itself included) and `after` rows in later blocks
// prefetches pf_rows rows from this row (from its own first): the next block's first where
// pf_rows rows follow it, else as far on as keeps them within the kernel's rows.
inline int64_t direct_prefetch_row(int64_t rows, int64_t count_left, int64_t after,
                                   int64_t pf_rows) {
  return std::min(rows, count_left * rows + after - pf_rows);
}

// The direct kernel's K loop (K > 16: iterations of kDirectUnrollK k-steps, then K's remainder
// unrolled) with B's rows prefetched b_prefetch rows ahead: how many of its iterations
// prefetch. In the last K block (KernelDesc::last) the rows past K are not B's, and prefetches of
// them (outside B's memory, where a prefetch that misses the TLB can stall: see
// b_prefetch_offset in blocking.h) are left out: the iterations from the first whose prefetches
// would reach row K on, and the remainder, do not prefetch. Otherwise every iteration and the
// remainder prefetch (the next K block's first rows).
inline constexpr int kDirectUnrollK = 4;
struct DirectPrefetchSteps {
  int64_t iterations = 0;  // of the K / kDirectUnrollK iterations, the first this many prefetch
  bool remainder = false;  // the K % kDirectUnrollK unrolled steps prefetch
};
inline DirectPrefetchSteps direct_prefetch_steps(int64_t K, int64_t b_prefetch, bool last_block) {
  const int64_t iterations = K / kDirectUnrollK;
  if (b_prefetch <= 0) return {0, false};
  if (!last_block) return {iterations, true};
  return {std::clamp<int64_t>((K - b_prefetch) / kDirectUnrollK, 0, iterations), false};
}

}  // namespace kiln::x86
