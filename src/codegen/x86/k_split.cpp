// The K splits: the packed path's (blocking.cpp: k_split_blocking) and direct_k. Each task sums
// a run of K blocks over all of C, the tasks after the first into partial buffers of M x N; a
// second pass adds the partials into C and applies the epilogue in place, with the packed
// last-block kernels over no K steps (C = epilogue(C + nothing)).
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/pack.h"

#include <immintrin.h>

namespace kiln::x86 {

namespace {

// direct_k: direct kernels (unpacked, fully specialized) over K blocks of about kDirectKBlock
// (or smaller: direct_k_block), the blocks split evenly over the threads. Measured on the Zen 3
// (AVX2), paired against the packed path (with its K split), 2 threads and 1: 16x16x8192
// 2.02-2.16x, 32x32x8192 1.27-1.33x, 64x64x4096 1.08-1.22x, 40x40x4096 1.07-1.28x, 32x128x4096
// 1.03-1.20x, 64x64x1024 1.01-1.14x, 48x48x1024 1.00-1.12x, 37x45x2100 1.11-1.19x; N <= 32 with
// more rows: 128x32x4096 1.17-1.35x, 512x32x4096 1.13-1.21x, 1024x16x4096 1.39-1.58x. With the
// smaller K blocks (direct_k_block), 1 thread / 2: 96x96x4096 1.04x / 1.07x, 128x64x4096 1.18x /
// 1.11x, 128x64x8192 1.28x / 1.28x, 100x100x4000 1.14x / 1.11x, 100x100x8192 1.11x / 1.10x,
// 160x96x4096 1.05x / 1.07x, 170x96x4096 1.00x / 1.02x, 128x48x1024 1.21x / 1.06x, 160x96x1024
// 1.07x / 1.03x, 96x96x1024 1.02x / 0.94x; past the rule (N over 100), 64x128x4096 0.98x /
// 1.07x, 128x128x4096 1.02x / 1.13x, 128x128x8192 0.79x / 0.91x, 96x128x4096 0.81x / 0.96x,
// 112x112x4096 0.95x / 1.02x, 64x256x4096 0.71x / 0.76x. Below K 1024 (or 256 per thread) the
// packed path or direct_rows (AVX2; AVX-512: kDirectKMinK). A transposed A: gemm_driver.cpp.
// AVX-512 (16-wide vectors, 4-vector tiles; Intel Xeon, 2 threads, paired plans): 16x16x8192
// 3.08x, 32x32x8192 1.89x, 64x64x4096 1.62x, 64x48x4096 1.81x, 37x45x2100 1.72x, 64x64x1024
// 1.54x, 1024x16x4096 1.36x, 2048x16x4096 1.21x, 512x32x4096 1.27x; past the AVX2 rule
// 128x64x4096 1.49x, 100x100x4000 1.35x, 64x256x4096 1.19x, 64x256x1024 1.33x, 96x128x4096
// 1.17x, 192x128x4096 1.13x, 256x64x1024 1.18x, 160x96x4096 1.16x, 128x128x4096 1.10x,
// 256x128x4096 1.11-1.16x, 128x128x1024 1.04x, 512x64x4096 1.02x; past the AVX-512 rule
// 512x128x4096 1.02x, 128x192x4096 1.05x, 64x512x4096 0.98x, 128x256x4096 0.94x, 256x256x4096
// 0.88x.
constexpr int64_t kDirectKBlock = 512;
// K at least (and per thread: 256 on AVX2, 300 for few rows, else 128), measured on AVX-512
// (Intel Xeon, paired plans, 2 threads; before, K of 1024 and 256 per thread) against the packed
// path: 100x64x1000 1.85x, 300x64x1000 1.77x, 64x64x1000 1.93x, 100x100x1000 1.48x,
// 300x100x1000 1.36x, 128x128x600 1.29x, 128x128x512 1.46x, 64x128x512 1.29x, 200x64x900 1.73x,
// 256x64x1000 1.75x, 160x96x700 1.48x, 100x256x600 1.06x, 64x256x800 1.18x, 100x160x400 1.30x,
// 128x128x450 1.26x, 64x256x400 1.08x, 60x250x350 1.13x, 64x256x256 1.00x; one thread
// 128x128x512 1.25x, 256x64x1000 1.44x, 128x128x1000 1.04x, 64x256x400 1.22x; against the
// skinny path, 16x256x1000 1.32x, 24x128x800 1.33x, 32x256x300 1.38x, 16x256x300 1.12x,
// 12x200x600 1.09x. Up to kDirectKFewRows rows (the skinny path's one row block) the partial
// sums' second pass weighs more: 2-12 rows with K from 600 1.04-1.35x (2x256x600 1.19x,
// 6x256x800 1.35x, 8x256x700 1.21x, 8x256x1000 1.07x, 8x128x800 1.04x), at 512 0.90-1.20x
// (8x256x512 0.90x, 12x256x512 0.90x, 4x256x512 1.09-1.20x, 6x200x512 1.17x), at 300
// 0.87-0.92x (4x256x300, 8x256x300, 10x200x300, 12x256x300).
constexpr int64_t kDirectKMinK = 256;
constexpr int64_t kDirectKFewRows = 12;
constexpr int64_t kDirectKMinKFewRows = 600;
constexpr int64_t kDirectKMinKAvx2 = 1024;
// With K of at least kDirectKSmallBlocksMinK and N over 16, the blocks shrink (halving, not below
// kDirectKMinBlock, then evened out over a multiple of the tasks: K / npc, 61 for 2101 over 34)
// until B's block fits kDirectKBBytes (half of a 32 KiB L1): each row block's
// kernel then finds it in L1, where at 512 it came from L2 for every row block. Measured on the
// Zen 3, paired plans, 1 thread (2 threads): 16x48x4096 1.29x (1.24x), 48x48x4096 1.21x (1.23x),
// 64x48x4096 1.16x (1.21x), 40x40x4096 1.09x (1.22x), 32x96x4096 1.11x (0.93x), 64x32x4096
// 1.08x (1.17x), 128x32x4096 1.07x (1.05x), 9x100x4096 1.10x (1.07x), 37x45x2100 1.07x (1.06x),
// 32x32x8192 1.06x (1.10x), 64x48x8192 1.27x (1.22x), 24x64x16384 1.56x (1.11x), 100x40x4096
// 1.21x (1.07x), 32x48x2048 1.26x (1.20x), 32x48x4096 0.97x (0.93x); with N = 16 (B's block of
// 512 is 32 KiB) blocks of 64-256 ran 0.91-1.02x, and with K = 1024 0.94-0.95x.
constexpr int64_t kDirectKBBytes = 16 * 1024;
constexpr int64_t kDirectKMinBlock = 64;
constexpr int64_t kDirectKSmallBlocksMinK = 2048;

// The K block of direct_k for an N-column B with K rows (see kDirectKBBytes).
int64_t direct_k_block(int64_t N, int64_t K) {
  if (N <= 16 || K < kDirectKSmallBlocksMinK) return kDirectKBlock;
  int64_t kb = kDirectKBlock;
  while (kb > kDirectKMinBlock && kb * N * 4 > kDirectKBBytes) kb /= 2;
  return kb;
}

// c[0, n) += x[0, n) (partial sums; x86 kernels run only where AVX2 does).
__attribute__((target("avx"))) void add_row(float* c, const float* x, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(c + j, _mm256_add_ps(_mm256_loadu_ps(c + j), _mm256_loadu_ps(x + j)));
  for (; j < n; ++j) c[j] += x[j];
}

}  // namespace

bool direct_k_fits(int64_t M, int64_t N, int64_t K, int64_t T, Isa isa) {
  const bool small_c = isa == Isa::avx2
                           ? (M * N <= 4096 && N <= 128) || (N <= 100 && M * N <= 16384)
                           : (M * N <= 16384 && N <= 256) || (N <= 128 && M * N <= 32768);
  const int64_t min_k = isa == Isa::avx2       ? std::max<int64_t>(kDirectKMinKAvx2, 256 * T)
                        : M <= kDirectKFewRows ? std::max<int64_t>(kDirectKMinKFewRows, 300 * T)
                                               : std::max<int64_t>(kDirectKMinK, 128 * T);
  return small_c && K >= min_k;
}

void GemmPlan::Impl::plan_direct_k(const GemmProblem& p, const KernelDesc& base, int threads,
                                   const CacheSizes& caches) {
  path = Path::direct_k;
  blk.MR = packed_mr(isa);
  blk.NR = packed_nr(isa);
  blk.mtiles = ceil_div(p.M, blk.MR);
  blk.npanels = ceil_div(p.N, blk.NR);
  blk.tk = k_split_tasks(p.M, p.N, threads, caches);
  blk.npc = round_up(ceil_div(p.K, direct_k_block(p.N, p.K)), blk.tk);
  // Blocks of K / npc rounded down, the last one longer by the remainder (under npc): a rounded
  // up block could leave the last one empty or negative (K 66305 over 259 blocks of 257).
  blk.KC = p.K / blk.npc;
  last_kb = p.K - (blk.npc - 1) * blk.KC;
  const KernelDesc plain = epilogue_desc(GemmProblem{}, isa);
  const int64_t rows_cap = direct_rows_cap(p, isa, caches);
  for (int64_t kt = 0; kt < blk.tk; ++kt) {
    const int target = kt > 0;
    GemmProblem q = p;
    if (target) q.ldc = p.N;  // a partial buffer
    const int64_t pc0 = kt * blk.npc / blk.tk, pc1 = (kt + 1) * blk.npc / blk.tk;
    for (int64_t pc = pc0; pc < pc1; ++pc) {
      const int first = pc == pc0, last = direct_k_last(pc);
      if (direct_k[target][first][last]) continue;
      KernelDesc d =
          direct_desc(plain, q, p.M, p.N, last ? last_kb : blk.KC, p.b.row_stride, rows_cap);
      d.accumulate = !first;
      d.last = 0;
      direct_k[target][first][last] = use(d);
    }
  }
  if (base.has_epilogue()) use_packed(base, 1, 1);
}

void GemmPlan::Impl::run_direct_k(const GemmProblem& p, ThreadPool* pool) const {
  const int64_t tk = blk.tk, npc = blk.npc, KC = blk.KC;
  float* partials =
      tk > 1 ? thread_scratch(ScratchSlot::k_partial, size_t((tk - 1) * M * N)) : nullptr;
  parallel(pool, tk, [&](int64_t begin, int64_t end) {
    for (int64_t kt = begin; kt < end; ++kt) {
      const int target = kt > 0;
      float* c = target ? partials + (kt - 1) * M * N : p.c;
      const int64_t pc0 = kt * npc / tk, pc1 = (kt + 1) * npc / tk;
      for (int64_t pc = pc0; pc < pc1; ++pc) {
        const int last = direct_k_last(pc);
        const int64_t k0 = pc * KC;
        const KernelArgs args{nullptr, nullptr, last ? last_kb : KC, 0, 0, 1.0f};
        direct_k[target][pc == pc0][last]->fn(&args, p.a.data + k0 * p.a.col_stride,
                                              p.b.data + k0 * p.b.row_stride, c);
      }
    }
  });
  reduce_k_split(p, partials, pool);
}

// Over the row tiles in parallel; nothing to do for one task without an epilogue.
void GemmPlan::Impl::reduce_k_split(const GemmProblem& p, const float* partials,
                                    ThreadPool* pool) const {
  const int64_t MR = blk.MR, NR = blk.NR, mtiles = blk.mtiles, npanels = blk.npanels, tk = blk.tk;
  const bool epilogue =
      kern[1][1][0][0] || kern[1][1][1][0] || kern[1][1][0][1] || kern[1][1][1][1];
  if (tk == 1 && !epilogue) return;
  const int64_t chunks = std::min(tk, mtiles);
  parallel(pool, chunks, [&](int64_t begin, int64_t end) {
    KernelArgs args{};
    args.ldc_bytes = p.ldc * 4;
    args.ldr_bytes = p.epi.ld_residual * 4;
    args.scale = p.epi.scale;
    args.kc = 0;
    for (int64_t ch = begin; ch < end; ++ch) {
      const int64_t r0 = ch * mtiles / chunks * MR,
                    r1 = std::min(M, (ch + 1) * mtiles / chunks * MR);
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t kt = 1; kt < tk; ++kt)
          add_row(p.c + i * p.ldc, partials + (kt - 1) * M * N + i * N, N);
      if (!epilogue) continue;
      for (int64_t i = r0; i < r1; i += MR) {
        const int me = r1 - i < MR;
        for (int64_t jp = 0; jp < npanels; ++jp) {
          const int64_t j0 = jp * NR;
          const int ne = N - j0 < NR;
          set_columns(args, p.epi, j0);
          args.residual = p.epi.residual ? p.epi.residual + i * p.epi.ld_residual + j0 : nullptr;
          // No K steps: the A and B pointers are not read.
          kern[1][1][me][ne]->fn(&args, p.c, p.c, p.c + i * p.ldc + j0);
        }
      }
    }
  });
}

}  // namespace kiln::x86
