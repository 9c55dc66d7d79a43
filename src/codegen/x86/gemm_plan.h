// The GEMM plan's internals: a problem resolved once to a path, its blocking and kernels.
// gemm_driver.cpp makes plans and runs the direct paths; skinny_path.cpp, packed_path.cpp,
// stream_path.cpp and dot_path.cpp plan or run theirs; k_split.cpp plans direct_k and runs both K
// splits; gemm_entry.cpp memoizes plans for gemm.h's calls.
#pragma once

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/kernel_registry.h"
#include "jit/thread_pool.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace kiln::x86 {

// Problems of at most this volume (M * N * K) run one fully specialized direct kernel on the
// calling thread (on two threads or more, from kSmallSplitMinFmas, a chunk of rows on each);
// batches of up to four times it run one problem per task.
inline constexpr int64_t kSmallVolume = 64 * 64 * 64;
// Up to kSmallVolume, a plan for two threads or more splits M over them (direct_rows through
// ThreadPool::run_parts) instead of running one direct kernel on one thread, from this many
// vector FMAs (M x ceil(N / lanes) x K; the time of a direct kernel follows them). Measured on an
// Intel Xeon (2 vCPUs, AVX-512), paired plans, 2 threads against 1: 20x8x1024 (20480) 1.60x,
// 16x16x1024 (16384) 1.64x, 64^3 (16384) 1.41-1.50x, 64x48x80 (15360) 1.42x, 56^3 (12544) 1.21x,
// 48x64x64 and 24x16x512 (12288) 1.26x and 1.31x; below it 40x64x64 (10240) 1.00x, 8192 FMAs
// 0.86-1.40x (32x64x64 0.86x, 128x32x32 1.06x, 64x32x64 1.19x, 256x16x32 1.40x), 48^3 (6912)
// 1.07x, 40^3 (4800) 0.86x: a hand-over costs about 0.4-0.7 us. A transposed A (x.T @ w) splits
// too: 64^3 1.64x, 56^3 1.45x, 64x48x80 1.60x (KILN_ISA=avx2 64^3 1.81x, 64x32x64 1.62x).
inline constexpr int64_t kSmallSplitMinFmas = 12 * 1024;
// A symbolic M takes direct_rows in blocks (plan_direct_blocks) above this many rows (at most it,
// the GEMV-like paths, whose kernels are specialized per M).
inline constexpr int64_t kDynamicDirectMinRows = 8;
// The blocks' kernels are those of the tiling of a C this tall, whatever a call's M.
inline constexpr int64_t kDynamicTallRows = int64_t{1} << 20;

// Floats in one vector register of `isa` (zmm: 16, ymm: 8).
inline constexpr int64_t isa_lanes(Isa isa) { return isa == Isa::avx512 ? 16 : 8; }

enum class Path : uint8_t {
  empty,
  direct,
  direct_rows,
  direct_k,
  skinny,
  stream,
  dot,
  packed,
  edge_split,
  transposed
};

// Which operand a dot plan (dot_path.cpp) reads along its rows: B's (x @ W.T: up to 8 or 16
// rows of A, B's rows unit-stride along K) or A's (1-4 columns of C).
enum class DotOver : uint8_t { none, b_rows, a_rows };

struct GemmPlan::Impl {
  Path path = Path::empty;
  Isa isa = Isa::avx2;
  // This CPU can run the plan's kernels. A plan for another ISA (an AVX-512 plan on an AVX2-only
  // CPU) can be made and inspected (its path, kernels and listings), not run.
  bool runnable = false;
  int64_t M = 0, N = 0, K = 0;
  bool prepacked_b = false;         // made for B from a PackedB
  int64_t l2_bytes = 0;             // of the caches the plan was made for
  std::vector<const Kernel*> used;  // registry entries live as long as the process
  // direct
  const Kernel* direct = nullptr;
  // The direct kernel's arguments for a call without bias, residual or scale.
  KernelArgs bare_args{nullptr, nullptr, 0, 0, 0, 1.0f};
  // The direct kernel reads no epilogue argument (no bias, residual, scale or column scale; an
  // activation takes none): every call of the plan, whose problems have that epilogue kind,
  // passes bare_args without reading the problem's epilogue.
  bool direct_bare = false;
  bool copy_b = false;  // B's columns are not unit-stride: copy B row-major first
  int64_t b_row_stride = 0, b_col_stride = 0;  // direct_rows with copy_b: B's, to copy it
  // direct_rows: M in chunks of `chunk` rows (one per thread), kernels by [last chunk]. With M
  // symbolic (plan_direct_blocks), block_rows > 0: each chunk in blocks of block_rows rows, kernels
  // by [the problem's last block, M mod block_rows rows where there are any].
  const Kernel* direct_rows[2] = {};
  int64_t block_rows = 0;
  // direct_k: blk.tk tasks over runs of blk.npc K blocks of blk.KC (the last last_kb), all
  // of C each; kernels by [target: C, partial buffer][first block of a task][last K block].
  int64_t last_kb = 0;
  const Kernel* direct_k[2][2][2] = {};
  // Whether K block pc takes the kernels of the last block (longer by K's remainder).
  int direct_k_last(int64_t pc) const { return pc == blk.npc - 1 && last_kb != blk.KC; }
  // skinny: N in chunks (one per thread), K in blocks (so each pass over B stays within a few
  // hundred pages); kernels by [last chunk][K block kind: first, middle, last, only].
  int64_t chunk = 0, nchunks = 0, kb = 0, nkb = 0;
  const Kernel* skinny[2][4] = {};
  // stream: N in chunks, kernels by [last chunk] (over M rows where M > 1, not column_as_row);
  // with blk.tk > 1 (M = 1), K in that many runs per chunk
  // (blk's MR, NR, mtiles and npanels set for reduce_k_split, kern[1][1] its epilogue)
  const Kernel* stream[2] = {};
  // A one-column C run on the stream path as its transpose (M, N: the transpose's 1 and M).
  bool column_as_row = false;
  // dot: the outputs (N, or M for DotOver::a_rows) in chunks of `chunk` (one per thread), each in
  // blocks of dot_block rows of X that every row of A reads while they are in L2; kernels by [the
  // problem's last block].
  DotOver dot_over = DotOver::none;
  int64_t dot_block = 0;
  // dot[] takes dot_vecs vectors (rows of A for b_rows, columns of B for a_rows) a pass: up to
  // four on AVX-512, two on AVX2. The vectors left after those passes (vrows % dot_vecs) by
  // dot_rest[].
  const Kernel* dot[2] = {};
  const Kernel* dot_rest[2] = {};
  int dot_vecs = 1;
  // edge_split (edge_split.cpp): all of C but its last column on split_main (a direct plan),
  // the last column on split_edge (a dot plan, A @ b).
  std::shared_ptr<const GemmPlan> split_main, split_edge;
  // transposed (transposed_path.cpp): C^T = B^T @ A^T on transposed_plan into a scratch, copied
  // into C by 8x8 transposes (transpose_into); then, with an epilogue, transposed_epilogue (a
  // direct kernel over all of C with no K steps, C = epilogue(C)).
  std::shared_ptr<const GemmPlan> transposed_plan;
  const Kernel* transposed_epilogue = nullptr;
  // packed
  // Each of tm x tn tasks owns a block of C: row tiles [ti * mtiles / tm, ...) and column panels
  // [tj * npanels / tn, ...), and packs privately what it needs (no barriers): B per (KC x NC)
  // block, panel by panel just before its first use; A per (MC x KC) block. A thread whose tasks
  // are done runs column panels of the others' blocks from their packing (panel_share.h).
  PackedBlocking blk;
  const Kernel* kern[2][2][2][2] = {};  // [accumulate][last][m edge][n edge]
  // With blk.a_rs: the same kernels reading A in place and packing it on the way (the first
  // column panel over each block of A).
  const Kernel* kern_packa[2][2][2][2] = {};
  // With blk.b_rs: the same kernels reading B in place and packing it on the way (the first row
  // tile over each whole panel of a block); [accumulate][last][m edge].
  const Kernel* kern_packb[2][2][2] = {};
  // Where row tiles run outermost (blk.rows_outer): the kernels over several whole panels in one
  // call (KernelDesc::panel_loop); [accumulate][last][m edge].
  const Kernel* kern_loop[2][2][2] = {};

  const Kernel* use(const KernelDesc& d) {
    const Kernel& k = get_kernel(d);
    // A last chunk as wide as the others reuses their kernel: listed once.
    if (std::find(used.begin(), used.end(), &k) == used.end()) used.push_back(&k);
    return &k;
  }
  void run(const GemmProblem& p, ThreadPool* pool, const PackedB* packed) const;
  // The common small call, inlined into GemmPlan::run: the direct kernel with no further call,
  // frame or path switch, where direct_fits(p) (otherwise p takes run()).
  bool direct_fits(const GemmProblem& p) const;
  void run_direct_fast(const GemmProblem& p) const;
  void run_direct(const GemmProblem& p) const;
  void run_direct_rows(const GemmProblem& p, ThreadPool* pool) const;
  void run_skinny(const GemmProblem& p, ThreadPool* pool) const;
  void run_stream(const GemmProblem& p, ThreadPool* pool) const;
  void run_packed(const GemmProblem& p, ThreadPool* pool, const PackedB* packed) const;
  void run_direct_k(const GemmProblem& p, ThreadPool* pool) const;
  void run_dot(const GemmProblem& p, ThreadPool* pool) const;
  void run_edge_split(const GemmProblem& p, ThreadPool* pool) const;
  void run_transposed(const GemmProblem& p, ThreadPool* pool) const;
  // After a K split (packed or direct_k): C += the partial buffers, then the epilogue.
  void reduce_k_split(const GemmProblem& p, const float* partials, ThreadPool* pool) const;
  // Plans the direct_k path (k_split.cpp); base: the problem's epilogue.
  void plan_direct_k(const GemmProblem& p, const KernelDesc& base, int threads,
                     const CacheSizes& caches);
  // Plans the skinny path (skinny_path.cpp) where it can run p (not where direct_k_can);
  // false where it cannot.
  bool plan_skinny(const GemmProblem& p, const KernelDesc& base, int64_t T, bool prepacked_b,
                   bool direct_k_can, const CacheSizes& caches);
  // Plans the direct_rows path (one chunk of rows per thread, at most T); with split_only, only
  // where M makes two chunks or more (false, nothing planned, where it does not).
  bool plan_direct_rows(const GemmProblem& p, const KernelDesc& base, int64_t T,
                        const CacheSizes& caches, bool split_only);
  // direct_rows for a symbolic M: kernels over a fixed number of rows (a block of the tiling a
  // tall C takes) and one for the last block's rows (at most block_rows - 1 of them over every
  // M), so the kernels do not depend on M.
  void plan_direct_blocks(const GemmProblem& p, const KernelDesc& base, int64_t T,
                          const CacheSizes& caches);
  // For both: copy_b and B's strides from p; returns the row stride the kernels read B at.
  int64_t plan_direct_rows_b(const GemmProblem& p);
  // Plans the stream path for a GEMV p; base: p's epilogue (bias_bcast: one bias value).
  void plan_stream(const GemmProblem& p, const KernelDesc& base, int64_t T);
  // Plans the stream path over the rows of p (stream_rows_can); base: p's epilogue.
  void plan_stream_rows(const GemmProblem& p, const KernelDesc& base, int64_t T);
  // Plans edge_split (edge_split.cpp) where N is one past a multiple of the vector width, C's
  // last column can take the dot path and the others a direct one; false (nothing planned)
  // elsewhere.
  bool plan_edge_split(const GemmProblem& p, int threads, const CacheSizes& caches);
  // Plans the transposed path (transposed_path.cpp) for x.T @ w with 2-8 columns of C (up to 64
  // on Zen cores with AVX2), where it pays; false (nothing planned) elsewhere.
  bool plan_transposed(const GemmProblem& p, const KernelDesc& base, int threads,
                       const CacheSizes& caches);
  // Plans the dot path (dot_path.cpp) for dot_path_for(p) != DotOver::none.
  void plan_dot(const GemmProblem& p, DotOver over, const KernelDesc& base, int threads,
                const CacheSizes& caches);
  // kern[acc][last][m edge][n edge] for each edge this problem has (blk's MR, NR).
  void use_packed(const KernelDesc& base, int acc, int last);
};

// fn over [0, n) on the pool (one task per index), or on this thread when pool is null or n is
// 1. A template, so that a lambda is called directly on one thread and handed to the pool by
// reference: made a ThreadPool::RangeFn, a lambda of more than two captures is copied to the
// heap (a malloc and a free each call, about 10 ns of a 2x2x34 x @ W.T's 70).
template <class Fn>
void parallel(ThreadPool* pool, int64_t n, Fn&& fn) {
  if (pool && n > 1)
    pool->parallel_for(n, 1, ThreadPool::RangeFn(std::ref(fn)));
  else
    fn(int64_t{0}, n);
}
// Whether a direct kernel over rows x cols of p, B's rows b_rs apart, encodes every displacement
// it needs (under 2^28 elements).
bool direct_disp_fits(const GemmProblem& p, int64_t rows, int64_t cols, int64_t b_rs);
// Whether B's rows are a page or more apart (skinny_path.cpp): kernels that walk down B's
// columns then load a new page every k-step.
bool b_rows_page_apart(const GemmProblem& p);
// The descriptor fields of p's epilogue (bias, scale, activation, residual).
KernelDesc epilogue_desc(const GemmProblem& p, Isa isa);
// A direct kernel over rows x cols of p with K steps, B's rows b_rs apart, at most rows_cap rows
// per block (0: the tiling's own).
KernelDesc direct_desc(const KernelDesc& base, const GemmProblem& p, int64_t rows, int64_t cols,
                       int64_t K, int64_t b_rs, int64_t rows_cap = 0);
// The rows an AVX-512 direct kernel's block may hold where A's rows (read in place) fall into few
// L1 sets (row strides near a multiple of 4 KiB: more lines in one set than it has ways evict
// each other between k-steps); 0 where they spread, and for AVX2.
int64_t direct_rows_cap(const GemmProblem& p, Isa isa, const CacheSizes& caches);
// Whether the stream path (stream_path.cpp) can run p (GEMV, B's rows forward with unit column
// stride).
bool stream_can(const GemmProblem& p, bool prepacked_b);
// Whether the stream path can run p over its 2 to kStreamMaxRows rows (stream_path.cpp).
bool stream_rows_can(const GemmProblem& p, bool prepacked_b);
// Whether p takes the stream path over its rows (stream_path.cpp) on `isa` with these caches.
bool stream_rows_for(const GemmProblem& p, Isa isa, bool prepacked_b, const CacheSizes& caches);
// A.T @ b (one column, A's columns unit-stride, C and the residual contiguous columns), run on
// the stream path as its transpose row_problem_of_column(p).
bool column_as_row_fits(const GemmProblem& p);
GemmProblem row_problem_of_column(const GemmProblem& p);
// The dot path's operand for p, or DotOver::none where it cannot run p or K is too short for it
// to pay (dot_path.cpp) on the machine `caches` describes (the plan's; the host's is
// host_cpu().caches). instead_of_packed: asked again where p would otherwise take the packed
// path, which some x @ W.T problems run slower than the dot path (kDotMaxRowsOverPacked).
DotOver dot_path_for(const GemmProblem& p, Isa isa, bool prepacked_b, const CacheSizes& caches,
                     bool instead_of_packed = false);
// The columns of each of the skinny path's chunks of C (skinny_path.cpp) on T threads.
int64_t skinny_chunk_cols(const GemmProblem& p, int64_t T, Isa isa);
// Whether direct_k (small C, a long K; k_split.cpp) suits an M x N x K problem on T threads.
bool direct_k_fits(int64_t M, int64_t N, int64_t K, int64_t T, Isa isa);

// Plans for symbolic extents (gemm_entry.cpp), for stats().
struct SymbolicPlanCounts {
  int64_t exact_plans, bounded_plans, exact_kernels;
};
SymbolicPlanCounts symbolic_plan_counts();

}  // namespace kiln::x86
