// kiln's x86 float32 GEMM: asmjit-generated microkernels (AVX-512 or AVX2+FMA) with fused
// epilogues, BLIS-style blocking for large shapes, fully specialized unpacked kernels for small
// ones and for GEMV-like shapes. This header is the whole interface; asmjit stays in the .cpp
// files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {
class ThreadPool;
}

namespace kiln::x86 {

enum class Isa : uint8_t { avx2, avx512 };
struct CacheSizes;  // blocking.h
class GemmPlan;
enum class Activation : uint8_t { none, relu, gelu, gelu_tanh, silu };
// How an epilogue's residual combines with the activated value (KernelDesc::has_residual).
enum ResidualOp : int64_t { kResidualNone = 0, kResidualAdd = 1, kResidualMul = 2 };

// Applied in registers, in this order, before C is stored:
//   C(i, j) = act(scale * col_scale[j] * sum_k A(i, k) B(k, j) + bias[j]) + residual(i, j)
// or, with residual_mul, times residual(i, j) (a gate: silu(x @ w1) * (x @ w3) with x @ w3 stored)
// gelu is the erf form (0.5 x (1 + erf(x / sqrt 2)), erf the rational approximation of
// codegen/erf_rational.h, a few ulp);
// gelu_tanh is the tanh approximation; silu is x * sigmoid(x).
struct GemmEpilogue {
  const float* bias = nullptr;  // [N], broadcast over rows; nullptr: none
  float scale = 1.0f;
  Activation act = Activation::none;
  const float* residual = nullptr;  // residual(i, j) = residual[i * ld_residual + j]
  int64_t ld_residual = 0;
  bool residual_mul = false;  // the residual multiplies instead of adding
  // [N], broadcast over rows (a per-column scale: LayerScale's gamma); nullptr: none.
  const float* col_scale = nullptr;
};

// One operand: element (i, j) is at data[i * row_stride + j * col_stride] (transposes and strided
// views without copies). Strides are in elements and may be any value, including 0.
struct MatrixRef {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 1;
};

// C[M, N] (row stride ldc, unit column stride) = epilogue(A[M, K] @ B[K, N]). C must not alias A,
// B or the residual: the K splits and the transposed path write C before they read the residual
// (Function::call runs a caller's output that overlaps an input through a temporary).
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  MatrixRef a, b;
  float* c = nullptr;
  int64_t ldc = 0;
  GemmEpilogue epi;
  // Extents that change from call to call (symbolic dims). x86::gemm and the other calls give
  // each call's extents the plan of an exact problem, with kernels specialized on them, up to a
  // process-wide budget of kernels (set_symbolic_exact_kernel_budget); after it, and in
  // GemmPlan::make, only paths whose kernels do not depend on them are taken (register-blocked MR x
  // NR kernels, edge kernels by remainder; for M, direct kernels over fixed blocks of rows and one
  // per remainder), so the set of generated kernels stays bounded. A dynamic M keeps the GEMV-like
  // and skinny paths where an exact one would take them (their kernels are specialized per M, at
  // most 32 of them per N and K), and x @ W.T the dot path (its kernels take one to four rows of A
  // at a time).
  bool dynamic_m = false;
  bool dynamic_nk = false;
};

// True when the CPU has at least AVX2+FMA (after the KILN_ISA cap).
bool available();
// Whether this CPU can run kernels of `isa` (ignores the KILN_ISA cap; for tests).
bool isa_supported(Isa isa);
// The ISA chosen from the CPU feature bits and the KILN_ISA cap.
Isa selected_isa();
const char* isa_name(Isa isa);
std::string isa_name();  // of selected_isa(): "avx512" or "avx2"

// Runs one problem with the selected ISA, or with `isa` (tests run both ISAs in one process).
void gemm(const GemmProblem& p, ThreadPool& pool);
void gemm(const GemmProblem& p, ThreadPool& pool, Isa isa);

// Batched: problem b uses a.data + b * a, b.data + b * b, c + b * c, residual + b * residual
// (element offsets). A batch stride of 0 broadcasts that operand over the batch.
struct BatchStrides {
  int64_t a = 0, b = 0, c = 0, residual = 0;
};
void gemm_batched(const GemmProblem& p, int64_t batch, const BatchStrides& strides,
                  ThreadPool& pool);
void gemm_batched(const GemmProblem& p, int64_t batch, const BatchStrides& strides,
                  ThreadPool& pool, Isa isa);

// A constant B packed once (weights known at compile time) into the panel layout of one ISA's
// microkernel, reused by every call of gemm_prepacked.
class PackedB {
 public:
  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  Isa isa() const { return isa_; }
  int64_t panel_width() const { return nr_; }
  const float* data() const { return data_.get(); }

  struct FreeDeleter {
    void operator()(float* p) const;
  };
  PackedB(Isa isa, int64_t k, int64_t n, int64_t nr, std::unique_ptr<float[], FreeDeleter> data)
      : isa_(isa), k_(k), n_(n), nr_(nr), data_(std::move(data)) {}

 private:
  Isa isa_;
  int64_t k_, n_, nr_;
  std::unique_ptr<float[], FreeDeleter> data_;
};
std::shared_ptr<const PackedB> pack_b(MatrixRef b, int64_t K, int64_t N);
std::shared_ptr<const PackedB> pack_b(MatrixRef b, int64_t K, int64_t N, Isa isa);
// As gemm, with B taken from `packed` (p.K and p.N must match it). p.b is ignored, except with
// symbolic dims (dynamic_m, dynamic_nk) and p.b.data set: then p.b must be the matrix packed, and
// an extent whose exact plan reads B in place faster than the packed copy reads p.b.
void gemm_prepacked(const GemmProblem& p, const PackedB& packed, ThreadPool& pool);

// One generated kernel, as kept in the registry.
struct KernelInfo {
  std::string name;       // e.g. "packed_avx512_14x32_m14n32_first_last_bias_gelu"
  std::string listing;    // asmjit's listing (made again from the descriptor when asked for)
  double codegen_ms = 0;  // time this process spent on it: codegen, or the disk-cache load
  int64_t code_bytes = 0;
  bool loaded_from_disk = false;  // from an x86 blob in the disk cache, not generated
};
// Every kernel that `p` would run (generating them if needed), and their listings together.
std::vector<KernelInfo> kernels_for(const GemmProblem& p, Isa isa);
std::string listing_for(const GemmProblem& p);
std::string listing_for(const GemmProblem& p, Isa isa);
// The listing of a plan's kernels, each with its codegen time and size.
std::string listing_of(const GemmPlan& plan);

// Counters for tests and kiln's stats().
struct GemmStats {
  int64_t calls = 0;             // gemm / gemm_prepacked / each gemm_batched
  int64_t direct_calls = 0;      // unpacked, fully specialized kernels (small shapes; also A and
                                 // B with unit column stride and B in a fifth of L2 (AVX-512: a
                                 // tenth), split over M: direct_rows in gemm_driver.cpp; or a
                                 // small C and a long K, split over K: direct_k in k_split.cpp)
  int64_t skinny_calls = 0;      // 2 <= M <= 16 (AVX-512: 32), unpacked, split over N
  int64_t stream_calls = 0;      // M = 1 (GEMV): B streamed row by row, split over N or K
  int64_t dot_calls = 0;         // GEMV-like along rows: x @ W.T (M <= 8, AVX-512 16, B's rows
                                 // along K) or A @ 1-4 columns: one dot product per output
  int64_t packed_calls = 0;      // BLIS path
  int64_t prepacked_calls = 0;   // of packed_calls: B from a PackedB (a constant weight)
  int64_t edge_split_calls = 0;  // of direct_calls: C's last column on the dot path (N one past
                                 // a multiple of the vector width; edge_split.cpp)
  int64_t transposed_calls = 0;  // x.T @ w with 2-8 columns (up to 64 on Zen cores with AVX2)
                                 // run as its transpose (counted also by that transpose's path;
                                 // transposed_path.cpp)
  // Plans for problems with symbolic extents (GemmProblem::dynamic_m / dynamic_nk): specialized
  // on a call's extents (or a listing's, kernels_for and listing_for), and the kernels they added
  // to the registry; made over the bounded kernel sets once those kernels reached the budget (a
  // fallback, logged at its first).
  int64_t symbolic_exact_plans = 0;
  int64_t symbolic_exact_kernels = 0;
  int64_t symbolic_bounded_plans = 0;
  int64_t kernels_generated = 0;
  double codegen_ms_total = 0;
  double codegen_ms_max = 0;
  int64_t kernels_loaded_from_disk = 0;  // x86 blobs loaded instead of generated
  int64_t kernels_stored_to_disk = 0;
  int64_t kernels_not_cacheable = 0;  // not position independent: never stored
  double disk_load_ms_total = 0;
  double disk_load_ms_max = 0;
  // Of every ThreadPool in the process (these GEMMs' and others'): jobs run on the caller alone
  // because the pool was busy, and run_parts parts the caller took back from a worker that had
  // not started them (asleep, or with no core to run on).
  int64_t pool_busy_fallbacks = 0;
  int64_t pool_parts_taken_back = 0;
};
GemmStats stats();

// The budget of kernels that plans specialized on symbolic extents may add (1024 unless set);
// returns the one before. Tests set it to exercise the bounded plans.
int64_t set_symbolic_exact_kernel_budget(int64_t kernels);

// A problem's shape, strides and epilogue kind resolved once to kernels and blocking; run() then
// takes only pointers from the problem (what an Executable holds for one matmul launch).
class GemmPlan {
 public:
  // Blocking is chosen for `threads` threads (run() is correct on any pool). With prepacked_b,
  // B comes from a PackedB at run time. A plan may be made for an ISA this CPU lacks (its path,
  // kernels and listings can be inspected); run() on it throws kiln's internal error.
  static std::shared_ptr<const GemmPlan> make(const GemmProblem& p, Isa isa, int threads,
                                              bool prepacked_b = false);
  // As make(), blocked for these caches instead of the host's (tests: other machines' rules).
  static std::shared_ptr<const GemmPlan> make(const GemmProblem& p, Isa isa, int threads,
                                              bool prepacked_b, const CacheSizes& caches);
  // p must have the shape, strides and epilogue kind (which pointers are set) of make()'s problem.
  void run(const GemmProblem& p, ThreadPool& pool, const PackedB* packed = nullptr) const;
  // As run(); pool == nullptr runs on the calling thread only (e.g. inside a parallel batch).
  void run_on(const GemmProblem& p, ThreadPool* pool, const PackedB* packed = nullptr) const;
  std::vector<KernelInfo> kernels() const;
  // For a plan made without prepacked_b: whether a B that never changes (a constant weight) is
  // worth packing once for this problem. False where the plan reads B in place (direct,
  // direct_rows, direct_k, stream; not a direct kernel that copies a B of other column stride, nor
  // direct_k over a wide C and a short K, see gemm_driver.cpp) or splits K (a plan for a PackedB
  // does neither).
  bool prepacked_b_pays() const;
  // Whether the plan was made with prepacked_b (run() takes B from its PackedB).
  bool reads_packed_b() const;
  // Whether run() keeps to the calling thread whatever the pool (one direct kernel, a dot plan
  // of one chunk, a packed plan of one task, the two of them for C's last column and the rest,
  // or nothing to do); false where it may hand tasks to the pool's workers.
  bool caller_only() const;
  ~GemmPlan();
  struct Impl;
  explicit GemmPlan(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::x86
