// Microkernel descriptors and the registry that generates each one once (thread-safe) and keeps
// its code, asmjit listing and codegen time. Generators live in packed_kernel.cpp and
// direct_kernel.cpp; both take a KernelDesc and emit into an asmjit assembler.
#pragma once

#include "codegen/x86/gemm.h"

#include <cstdint>
#include <mutex>
#include <string>

namespace kiln::x86 {

enum class KernelKind : int64_t {
  packed,  // BLIS microkernel: packed A panel [kc][MR] x packed B panel [kc][NR] -> C tile
  direct,  // unpacked, fully specialized: exact M, N, K and strides baked in (small / skinny)
  stream,  // GEMV (M = 1), or a few rows: a chunk of C's rows in L1, B streamed row by row; K at
           // run time
  dot,     // GEMV along rows: out[j] = v . X[j] over a chunk of rows X[j] (x @ W.T, A @ column)
};

// Everything that changes the generated code. Only int64_t fields: no padding, so it is compared
// and hashed as bytes. Strides are in elements.
struct KernelDesc {
  KernelKind kind = KernelKind::packed;
  int64_t isa = 0;   // Isa
  int64_t rows = 0;  // packed: valid rows of the tile (<= MR); direct: M; stream: M (1: the
                     // GEMV's kernel, else stream_rows_kernel.cpp's); dot: vectors (up to 4 on
                     // AVX-512 and 2 on AVX2, each a_rs from the one before)
  int64_t cols = 0;  // packed: valid cols of the tile (<= NR); direct: N; stream: chunk;
                     // dot: outputs (rows of X)
  // K: direct and dot: K; packed: 0 (kc comes at run time)
  int64_t MR = 0, NR = 0;  // packed: panel strides; direct: 0
  int64_t K = 0;
  // direct (stream: a_cs, b_rs, and over rows a_rs, ldc, ld_res; dot: a_cs = 1 (v), b_rs (X's
  // rows), ldc = 1); packed: a_rs > 0
  // reads A in place (rows a_rs apart, unit column stride) and stores its packed panel to
  // KernelArgs::a_pack as it goes (the first call over each block of A; see packed_kernel.cpp);
  // b_rs > 0 (not with a_rs) the same for B: its rows b_rs apart, its panel to
  // KernelArgs::b_pack (the first call over each panel of a block)
  int64_t a_rs = 0, a_cs = 0, b_rs = 0, ldc = 0, ld_res = 0;
  int64_t accumulate = 0;  // packed: add C's partial sum (not the first K block)
  int64_t last = 1;        // packed: last K block, apply the epilogue
  int64_t has_bias = 0, has_scale = 0, act = 0;
  int64_t has_residual = 0;   // ResidualOp: none, added, or multiplying (a gate)
  int64_t has_col_scale = 0;  // a per-column scale (KernelArgs::col_scale), as bias is added
  // dot and stream: one bias (and column scale) value, bias[0], for every output (N = 1)
  int64_t bias_bcast = 0;
  int64_t b_prefetch = 0;  // direct: B rows ahead prefetched into L1 in the K loop (0: none;
                           // none past K in the last block: direct_prefetch_steps)
  int64_t rows_cap = 0;    // direct: at most this many rows per block (0: the tiling's own)
  int64_t cols_outer = 0;  // direct: column tiles outer, row blocks inner (see direct_kernel.cpp)
  int64_t k_align = 0;     // dot: X's loads start on a vector boundary (AVX-512 64 bytes, AVX2
                           // 32) after a masked head found at run time; X's rows whole vectors
                           // apart
  // packed, whole columns (cols == NR), neither a_rs nor b_rs: one call runs KernelArgs::panels
  // consecutive panels of B (kc x NR floats apart) into as many C tiles side by side
  int64_t panel_loop = 0;

  bool operator==(const KernelDesc& o) const;
  // Any of bias, scale, activation, residual or column scale.
  bool has_epilogue() const {
    return has_bias || has_scale || act || has_residual || has_col_scale;
  }
  std::string name() const;
};

// The packed kernel's K loop unroll; it prefetches one line from KernelArgs::b_next per unrolled
// iteration.
constexpr int kPackedUnrollK = 4;
// The packed kernel's largest in-place row stride of A (KernelDesc::a_rs): its rows are
// displacements of one base register.
constexpr int64_t kPackedMaxARowStride = int64_t(1) << 24;
// ... and of B (KernelDesc::b_rs), whose rows are also prefetched kPackedBSourcePrefetchSteps
// ahead by displacement. Rows a multiple of 4 KiB apart share an L1 set (8 ways on a Zen 1):
// 32 rows ahead, the prefetched rows of 48x4096x1024 evicted each other and the plan ran 0.96x of
// B packed before the kernels (paired, 2 threads); 8 ahead 1.04x, 4 ahead 1.05x.
constexpr int64_t kPackedMaxBRowStride = int64_t(1) << 22;
constexpr int kPackedBSourcePrefetchSteps = 8;

// Every generated kernel is a KernelFn: fn(&args, a, b, c). The operand pointers come in
// registers (rsi, rdx, rcx), so a small kernel's first loads do not wait on a store to `args`
// and its reload (store forwarding), and the caller builds them without copying its problem
// through vector registers; the rest is read from `args` where it is needed.
struct KernelArgs {
  const float* bias;      // at the tile's first column
  const float* residual;  // at the tile's first element
  int64_t kc;             // packed and stream
  int64_t ldc_bytes;  // packed; dot with 2 vectors: the second vector's outputs from the first's
  int64_t ldr_bytes;  // packed; dot with 2 vectors: its residual from the first's
  float scale;
  const float* b_next = nullptr;  // packed: prefetched into L2 from here, a line per 4 k-steps
  // packed: the next call's C tile (rows ldc_bytes apart), prefetched into L1 a row per 4
  // k-steps; nullptr (or any address: prefetches do not fault) where there is none.
  const float* c_next = nullptr;
  // packed with a_rs > 0: where A's packed panel [kc][MR] goes.
  float* a_pack = nullptr;
  const float* col_scale = nullptr;  // at the tile's first column, as bias
  // packed with b_rs > 0: where B's packed panel [kc][NR] goes.
  float* b_pack = nullptr;
  // packed with panel_loop: the panels (and C tiles) the call runs, at least 1; bias, column
  // scale and residual are at the first tile's first column; b_next and c_next are for the call
  // after the last panel.
  int64_t panels = 1;
  // stream over rows (KernelDesc::rows > 1): C's chunk accumulates here, its rows
  // stream_rows_block_ld(cols) floats apart, and goes to C through the epilogue after K.
  float* c_block = nullptr;
};
using KernelFn = void (*)(const KernelArgs* args, const float* a, const float* b, float* c);

// An epilogue's vectors along N (bias and column scale) from column j on, into `args` (null
// where the epilogue has none).
inline void set_columns(KernelArgs& args, const GemmEpilogue& e, int64_t j) {
  args.bias = e.bias ? e.bias + j : nullptr;
  args.col_scale = e.col_scale ? e.col_scale + j : nullptr;
}

struct Kernel {
  KernelFn fn = nullptr;
  KernelInfo info;  // without the listing: see kernel_listing()
  KernelDesc desc;
  mutable std::once_flag listing_once;
  mutable std::string listing;
};

// Returns the kernel for `desc`, generating it on first use. The reference stays valid for the
// life of the process. No lock is held while code is generated.
const Kernel& get_kernel(const KernelDesc& desc);

// The asmjit listing of k's code, made on first request (from its descriptor, see
// kernel_registry.cpp) and kept with the kernel; thread-safe.
const std::string& kernel_listing(const Kernel& k);

// Registry counters (for stats()).
int64_t kernels_generated();
double codegen_ms_total();
double codegen_ms_max();
// Disk-cache counters: kernels loaded from x86 blobs instead of generated (and the time each load
// took: entry read, checks, executable copy), kernels stored, kernels not stored because their
// code is not position independent.
int64_t kernels_loaded_from_disk();
int64_t kernels_stored_to_disk();
int64_t kernels_not_cacheable();
double disk_load_ms_total();
double disk_load_ms_max();

}  // namespace kiln::x86
