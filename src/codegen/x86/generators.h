// The GEMM code generators. Each emits one complete function of type KernelFn
// for a descriptor into an asmjit assembler; kernel_registry.cpp owns the CodeHolder and runtime.
#pragma once

#include "codegen/x86/kernel_registry.h"

#include <asmjit/x86.h>

namespace kiln::x86 {

// Register-blocked microkernel over packed panels (packed_kernel.cpp).
void emit_packed_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Unpacked kernel for exact M, N, K and strides (direct_kernel.cpp).
void emit_direct_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Streaming GEMV (M = 1) over a chunk of columns (stream_kernel.cpp).
void emit_stream_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);
// Dot-product GEMV over a chunk of rows of X, each row along K (dot_kernel.cpp).
void emit_dot_kernel(asmjit::x86::Assembler& a, const KernelDesc& d);

// The direct kernel's register tile for a shape: rows per block and vectors per column tile.
struct DirectTiling {
  int vectors = 1;  // column tile width in vectors
  int rows_max = 1;
};
// rows_cap > 0: at most that many rows per block (KernelDesc::rows_cap).
DirectTiling direct_tiling(bool avx512, int64_t M, int64_t N, int64_t rows_cap = 0);

}  // namespace kiln::x86
