// Packing routines and per-thread scratch for the GEMM driver.
#include "codegen/x86/pack.h"

#include "support/check.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::x86 {

namespace {

// One full 14-row panel of a row-major A (AVX-512; only reached through the AVX-512 kernel's
// MR = 14): for each k, a 14-lane gather down the column, stored as the panel's row k. The packed
// path packs an A whose rows go forward in its kernels instead (gemm_driver.cpp, blk.a_rs): this
// serves rows 0 or backwards apart (a broadcast or reversed view). A 16x16 register transpose
// (14 row loads, 64 shuffles and 16 stores per 16 columns) ran at 0.80-0.92x of the gathers on an
// Intel Xeon (paired, blocks of 252x500, 256x256, 1000x1000 and 2048x2048; 1.16x only on a 100x37
// block): its shuffles all issue on one port.
__attribute__((target("avx512f"))) void pack_a_panel14_gather(const float* base, int64_t rs,
                                                              int64_t kc, float* d) {
  alignas(64) int32_t offs[16] = {};
  for (int r = 0; r < 14; ++r) offs[r] = int32_t(r * rs);
  const __m512i idx = _mm512_load_si512(offs);
  const __mmask16 m = 0x3fff;
  int64_t k = 0;
  for (; k + 2 <= kc; k += 2) {
    const __m512 g0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base + k, 4);
    const __m512 g1 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base + k + 1, 4);
    _mm512_mask_storeu_ps(d + k * 14, m, g0);
    _mm512_mask_storeu_ps(d + (k + 1) * 14, m, g1);
  }
  for (; k < kc; ++k)
    _mm512_mask_storeu_ps(d + k * 14, m,
                          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base + k, 4));
}

// The low (h = 0) or high 128 bits of v.
__attribute__((target("avx"), always_inline)) inline __m128 half128(__m256 v, int h) {
  return h ? _mm256_extractf128_ps(v, 1) : _mm256_castps256_ps128(v);
}

// One full 6-row panel of a row-major A (AVX2's MR = 6), columns [0, kc): 6 rows x 8 columns at
// a time. Each row's 8 floats hold columns k..k+3 and k+4..k+7 in their two 128-bit halves, so
// transposes within the halves give rows 0-3 of a column in one half (and rows 4-5 in pairs),
// stored to its [k][6] slot as 4 and 2 floats. The scalar copy it replaces ran at about 1
// float/ns on a Zen 3, which at 512^3 on two threads is 5% of the GEMM. Against an 8x8
// transpose's vperm2f128 (8 macro-ops on an AMD Zen 1) with 8-float stores, Zen 1, one thread,
// A's panels of M x K in K blocks of kc: 90x512 (kc 256) 1.19x, 132x1024 (kc 1024) 1.19x,
// 256x512 1.11x, 36x745 (kc 252) 1.14x, 1026x2048 (from memory) 1.09x.
__attribute__((target("avx"))) void pack_a_panel6(const float* base, int64_t rs, int64_t kc,
                                                  float* d) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    const float* s = base + k;
    const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + rs),
                 r2 = _mm256_loadu_ps(s + 2 * rs), r3 = _mm256_loadu_ps(s + 3 * rs),
                 r4 = _mm256_loadu_ps(s + 4 * rs), r5 = _mm256_loadu_ps(s + 5 * rs);
    // t: pairs of rows interleaved (t4: rows 4-5 of columns 0-1 and 4-5; t5: 2-3 and 6-7); u[j]:
    // rows 0-3 of column j (low half) and j + 4 (high half).
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xee),
                         _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xee)};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      float* o = d + (k + 4 * h) * 6;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) _mm_storeu_ps(o + j * 6, half128(u[j], h));
      const __m128 e01 = half128(t4, h), e23 = half128(t5, h);
      _mm_storel_pi(reinterpret_cast<__m64*>(o + 0 * 6 + 4), e01);
      _mm_storeh_pi(reinterpret_cast<__m64*>(o + 1 * 6 + 4), e01);
      _mm_storel_pi(reinterpret_cast<__m64*>(o + 2 * 6 + 4), e23);
      _mm_storeh_pi(reinterpret_cast<__m64*>(o + 3 * 6 + 4), e23);
    }
  }
  for (; k < kc; ++k)
    for (int64_t r = 0; r < 6; ++r) d[k * 6 + r] = base[r * rs + k];
}

// A transposed A's block (x.T @ w: A's rows, along M, are unit-stride): row k of the block is
// the run base[k * cs ..][0, mc). Each run is read once, front to back, its MR-float pieces
// stored at their panels' row k (a fixed-size copy each for the kernels' MR: inlined moves). Panel
// by panel instead, each panel read kc lines cs floats apart: with cs a multiple of 1024 those
// lines share a few L1 and L2 sets, and the next panel found them evicted. AMD Zen 1, paired
// plans: 2048x32x512 1.24x on one thread; on two, 1.00-1.28x over five runs (4096x64x4096
// 1.06-1.17x, 1024x32x8192 1.01-1.19x), 512^3 and 1000^3 1.00x.
template <int64_t kMR>
void pack_a_transposed_rows(const float* base, int64_t cs, int64_t mc, int64_t kc, int64_t MR,
                            float* dst) {
  const int64_t mr = kMR ? kMR : MR, full = mc / mr * mr, rest = mc - full;
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = base + k * cs;
    float* d = dst + k * mr;
    for (int64_t p = 0; p < full; p += mr)
      std::memcpy(d + p * kc, s + p, size_t(kMR ? kMR : mr) * sizeof(float));
    if (rest) std::memcpy(d + full * kc, s + full, size_t(rest) * sizeof(float));
  }
}

void pack_a_transposed(const float* base, int64_t cs, int64_t mc, int64_t kc, int64_t MR,
                       float* dst) {
  if (MR == 6)
    pack_a_transposed_rows<6>(base, cs, mc, kc, MR, dst);
  else if (MR == 14)
    pack_a_transposed_rows<14>(base, cs, mc, kc, MR, dst);
  else
    pack_a_transposed_rows<0>(base, cs, mc, kc, MR, dst);
}

}  // namespace

void pack_a_block(const MatrixRef& a, int64_t i0, int64_t mc, int64_t k0, int64_t kc, int64_t MR,
                  float* dst) {
  const int64_t rs = a.row_stride, cs = a.col_stride;
  if (rs == 1) {
    pack_a_transposed(a.data + i0 + k0 * cs, cs, mc, kc, MR, dst);
    return;
  }
  // Row offsets of a 14-row panel fit the gather's int32 indices.
  const bool gather14 = MR == 14 && cs == 1 && rs >= 0 && rs * 13 < (int64_t{1} << 31) / 4 - kc;
  for (int64_t p = 0; p < mc; p += MR) {
    const int64_t rows = std::min(MR, mc - p);
    float* d = dst + p * kc;
    const float* base = a.data + (i0 + p) * rs + k0 * cs;
    if (gather14 && rows == 14) {
      pack_a_panel14_gather(base, rs, kc, d);
    } else if (cs == 1 && rows == 6 && MR == 6) {
      pack_a_panel6(base, rs, kc, d);
    } else if (cs == 1) {
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
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = 0; r < rows; ++r) d[k * MR + r] = base[r * rs + k * cs];
    }
  }
}

namespace {

// Rows [k0, k1) of a full 32-column panel of a row-major B (AVX-512's NR = 32): two zmm per row.
__attribute__((target("avx512f"), always_inline)) inline void pack_b_rows32(const float* base,
                                                                            int64_t rs, int64_t k0,
                                                                            int64_t k1,
                                                                            float* dst) {
  for (int64_t k = k0; k < k1; ++k) {
    const float* s = base + k * rs;
    _mm512_storeu_ps(dst + k * 32, _mm512_loadu_ps(s));
    _mm512_storeu_ps(dst + k * 32 + 16, _mm512_loadu_ps(s + 16));
  }
}

// Rows [k0, k1) of a full 16-column panel of a row-major B (AVX2's NR = 16): two ymm per row
// instead of a memcpy call per 64-byte row (Zen 3, 128x4096x1024, paired against OpenBLAS:
// 0.94-0.97x before, 0.95-1.02x after; small against the noise).
__attribute__((target("avx"), always_inline)) inline void pack_b_rows16(const float* base,
                                                                        int64_t rs, int64_t k0,
                                                                        int64_t k1, float* dst) {
  for (int64_t k = k0; k < k1; ++k) {
    const float* s = base + k * rs;
    _mm256_storeu_ps(dst + k * 16, _mm256_loadu_ps(s));
    _mm256_storeu_ps(dst + k * 16 + 8, _mm256_loadu_ps(s + 8));
  }
}

// Rows [k0, k1) of `panels` full panels of a row-major B from base (panels of a K-row block
// at dst): one loop, the row copies inlined. A call per panel and run of rows instead
// (pack_b_rows, 16 load/store pairs a call) packed 1.12-1.25x slower (AMD EPYC Zen 3, 1024 x 256
// blocks of a 1024 x 4096 and a 1024 x 1024 B, 1 and 2 threads). Paired plans against it, Zen 3,
// 2 threads: 35x1811x2726 1.12x, 32x768x768 1.11x, 48x4096x1024 1.04-1.08x (one thread
// 1.04x), 24x4096x1024 and 64x4096x1024 1.06x, 16x1024x1024 1.05x, 128x4096x1024 1.04x,
// 100x1000x1000 1.03x, 256^3 1.02x, 512^3 and 1000^3 1.00x.
__attribute__((target("avx"))) void pack_b_full_panels16(const float* base, int64_t rs, int64_t k0,
                                                         int64_t k1, int64_t panels, int64_t K,
                                                         float* dst) {
  for (int64_t q = 0; q < panels; ++q) pack_b_rows16(base + q * 16, rs, k0, k1, dst + q * K * 16);
}

__attribute__((target("avx512f"))) void pack_b_full_panels32(const float* base, int64_t rs,
                                                             int64_t k0, int64_t k1, int64_t panels,
                                                             int64_t K, float* dst) {
  for (int64_t q = 0; q < panels; ++q) pack_b_rows32(base + q * 32, rs, k0, k1, dst + q * K * 32);
}

// Rows [k0, k1) of a panel of a B with unit column stride: columns [j0, j0 + nr), zero past nr.
// A full panel goes through pack_b_full_panels16/32 as one panel (K, the stride between panels,
// then unused): their inlined row copies need the target attribute of a function around them.
void pack_b_rows(const MatrixRef& b, int64_t k0, int64_t k1, int64_t j0, int64_t nr, int64_t NR,
                 float* dst) {
  const float* base = b.data + j0;
  if (nr == 32 && NR == 32) return pack_b_full_panels32(base, b.row_stride, k0, k1, 1, 0, dst);
  if (nr == 16 && NR == 16) return pack_b_full_panels16(base, b.row_stride, k0, k1, 1, 0, dst);
  for (int64_t k = k0; k < k1; ++k) {
    std::memcpy(dst + k * NR, base + k * b.row_stride, size_t(nr) * sizeof(float));
    std::fill(dst + k * NR + nr, dst + (k + 1) * NR, 0.0f);
  }
}

// r[i] = column i of the 8x8 block whose row i r held.
__attribute__((target("avx"), always_inline)) inline void transpose8x8_regs(__m256 r[8]) {
  // t: pairs of rows interleaved; u[i] (i < 4): rows 0-3 of columns i and i + 4, in each 128-bit
  // half; u[4 + i]: the same of rows 4-7.
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
    u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xee);
    u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
    u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// The transpose of the 8x8 block at src (rows ss floats apart) into dst (rows ds apart). Every
// loop unrolled: left to -O2 the loops over r, t and u kept them in memory on the stack (~45
// cycles a block; 8x8 blocks were 34% of 9x21x211 x @ w.T, whose copy of B took 1.2 of its
// 1.9 us). Rows i and i + 4 are loaded into the two halves of one register, so that 4x4
// transposes within the halves finish the job: no vperm2f128 (8 macro-ops on an AMD Zen 1).
// Zen 1, one thread, panels of 16 columns as pack_b_panel_transposed walks them, against
// transpose8x8_regs' form: K x N 128x128 1.18x, 256x256 1.16x, 384x384 1.12x, 745x1072 1.10x,
// 1024x4096 (from memory) 1.03x.
__attribute__((target("avx"), always_inline)) inline void transpose8x8(const float* src, int64_t ss,
                                                                       float* dst, int64_t ds) {
  __m256 r[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src + i * ss)),
                                _mm_loadu_ps(src + (i + 4) * ss), 1);
    r[i + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src + i * ss + 4)),
                                    _mm_loadu_ps(src + (i + 4) * ss + 4), 1);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    const __m256 t0 = _mm256_unpacklo_ps(r[h], r[h + 1]), t1 = _mm256_unpackhi_ps(r[h], r[h + 1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[h + 2], r[h + 3]),
                 t3 = _mm256_unpackhi_ps(r[h + 2], r[h + 3]);
    _mm256_storeu_ps(dst + (h + 0) * ds, _mm256_shuffle_ps(t0, t2, 0x44));
    _mm256_storeu_ps(dst + (h + 1) * ds, _mm256_shuffle_ps(t0, t2, 0xee));
    _mm256_storeu_ps(dst + (h + 2) * ds, _mm256_shuffle_ps(t1, t3, 0x44));
    _mm256_storeu_ps(dst + (h + 3) * ds, _mm256_shuffle_ps(t1, t3, 0xee));
  }
}

// The first n (1-4) floats at p in an xmm register, the rest zero, by plain moves: on an AMD Zen 1
// a masked load (vmaskmovps) of them ran 3.7-4.1x slower (copy_short_runs, 462 runs of 3 floats
// 11 apart: 1.11-1.20 us masked, 0.30-0.32 us so).
template <int n>
__attribute__((target("avx"), always_inline)) inline __m128 load_first(const float* p) {
  static_assert(n >= 1 && n <= 4);
  if constexpr (n == 1) return _mm_load_ss(p);
  // (An 8-byte load that needs no alignment: p may sit 4 bytes off 8.)
  const __m128 two = _mm_castsi128_ps(_mm_loadu_si64(p));
  if constexpr (n == 2) return two;
  if constexpr (n == 3) return _mm_insert_ps(two, _mm_load_ss(p + 2), 0x20);
  if constexpr (n == 4) return _mm_loadu_ps(p);
}

// The first n (1-4) lanes of v stored to p, and nothing past them (no vmaskmovps: see
// load_first).
template <int n>
__attribute__((target("avx"), always_inline)) inline void store_first(float* p, __m128 v) {
  static_assert(n >= 1 && n <= 4);
  if constexpr (n == 4) return _mm_storeu_ps(p, v);
  if constexpr (n == 1) return _mm_store_ss(p, v);
  _mm_storeu_si64(p, _mm_castps_si128(v));
  if constexpr (n == 3) _mm_store_ss(p + 2, _mm_movehl_ps(v, v));
}

// The first n (1-8) lanes of v stored to p, and nothing past them.
template <int n>
__attribute__((target("avx"), always_inline)) inline void store_first(float* p, __m256 v) {
  static_assert(n >= 1 && n <= 8);
  if constexpr (n == 8) {
    _mm256_storeu_ps(p, v);
  } else if constexpr (n > 4) {
    _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    store_first<n - 4>(p + 4, _mm256_extractf128_ps(v, 1));
  } else {
    store_first<n>(p, _mm256_castps256_ps128(v));
  }
}

// Columns [c0, c1) of a transposed B's rows k0 .. k0 + Kr (1-4) into dst (rows NR apart): 8 at a
// time through 4x4 transposes in both 128-bit halves (runs c to c + 3 in the low half, c + 4 to
// c + 7 in the high), each run read as its Kr floats (load_first); the last columns (under 8)
// element by element. With the run's length a run-time bound (a loop of 1-7 trips per column) the
// copy took ~3 cycles a float: 2.5 us of the 2.9 us of 8x1000x3 x @ w.T. Per call, one thread:
// 8x1000x3 2.9 us -> 2.15 us unrolled -> 1.41 us with the transposes, 4x4096x4 10.2 us -> 4.7 us.
// (An 8x8 transpose of masked loads for every short run ran slower than the unrolled copy on the
// Zen 3: 8x1000x3 0.79x of OpenBLAS against 0.89x. Masked loads are what was slow: see
// load_first.)
template <int Kr>
__attribute__((target("avx"))) void copy_short_runs(const float* base, int64_t cs, int64_t k0,
                                                    int64_t c0, int64_t c1, int64_t NR,
                                                    float* dst) {
  static_assert(Kr >= 1 && Kr <= 4);
  int64_t c = c0;
  for (; c + 8 <= c1; c += 8) {
    __m256 r[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      r[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(load_first<Kr>(base + (c + i) * cs + k0)),
                                  load_first<Kr>(base + (c + 4 + i) * cs + k0), 1);
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    float* d = dst + k0 * NR + c;
    _mm256_storeu_ps(d, _mm256_shuffle_ps(t0, t2, 0x44));
    if constexpr (Kr > 1) _mm256_storeu_ps(d + NR, _mm256_shuffle_ps(t0, t2, 0xee));
    if constexpr (Kr > 2) _mm256_storeu_ps(d + 2 * NR, _mm256_shuffle_ps(t1, t3, 0x44));
    if constexpr (Kr > 3) _mm256_storeu_ps(d + 3 * NR, _mm256_shuffle_ps(t1, t3, 0xee));
  }
  for (; c < c1; ++c) {
    const float* s = base + c * cs + k0;
#pragma GCC unroll 8
    for (int k = 0; k < Kr; ++k) dst[(k0 + k) * NR + c] = s[k];
  }
}

// The same for a run of Kr in 1-7 floats (what the 8x8 transposes leave of K); none for 0. Runs of
// 5-7 go as their first 4 and the rest: element by element they took twice as long on an AMD
// Zen 1 (one thread, B of 1000 runs of 5, 6, 7: 2.06, 2.34, 2.84 us -> 0.99, 1.10, 1.60 us).
void copy_short_runs(int64_t Kr, const float* base, int64_t cs, int64_t k0, int64_t c0, int64_t c1,
                     int64_t NR, float* dst) {
  using Fn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, float*);
  static constexpr Fn kByRun[5] = {nullptr, copy_short_runs<1>, copy_short_runs<2>,
                                   copy_short_runs<3>, copy_short_runs<4>};
  if (Kr <= 0 || c1 <= c0) return;
  // 5-7 floats: their first 4 and the rest, each through the transposes.
  if (Kr > 4) kByRun[4](base, cs, k0, c0, c1, NR, dst), k0 += 4, Kr -= 4;
  kByRun[Kr](base, cs, k0, c0, c1, NR, dst);
}

// A panel of a transposed B (x @ w.T: column c of B is the run base[c * cs ..] along K), nr <= NR
// columns, into dst[K][NR] (NR: the row stride of dst, which may be all of B's N): 8 columns x 8
// rows at a time through an 8x8 transpose, K's last rows (under 8) by copy_short_runs, the last
// columns (under 8) down their runs (columns nr..NR-1 are zeroed by the caller). Element by element
// it ran at about 1 float/ns on the Zen 3 (128x4096x1024 with B transposed: 0.69x OpenBLAS).
__attribute__((target("avx"))) void pack_b_panel_transposed(const float* base, int64_t cs,
                                                            int64_t K, int64_t nr, int64_t NR,
                                                            float* dst) {
  const int64_t c8 = nr / 8 * 8, k8 = K / 8 * 8;
  // Each group of 8 columns down all of its 8 runs before the next group: 8 runs at a time, since
  // runs a multiple of 4 KiB apart share one L1 set, which 16 columns' lines overflow; each run
  // read front to back in one go, which the hardware prefetchers follow. Taking a line (16 k)
  // of each group in turn instead packed 1.35-1.4x slower (AMD EPYC Zen 3, 2 threads, 256 x 256
  // blocks of a 4096 x 1024 and a 1024 x 1024 W); paired plans against it, 2 threads:
  // 32x4096x1024 x @ W.T 1.09x, 200x4096x1024 1.06x, 48x1811x2726 1.05x, 128x4096x1024 and
  // 64x4096x4096 1.04x (one thread 1.03x), 100x1000x1000 1.03x, 512^3 and 1000^3 1.00x.
  for (int64_t c = 0; c < c8; c += 8)
    for (int64_t h = 0; h < k8; h += 8) transpose8x8(base + c * cs + h, cs, dst + h * NR + c, NR);
  // K's last rows (under 8) of the columns the transposes took (all of K under 8: every column);
  // then the columns past them, each down its run.
  copy_short_runs(K - k8, base, cs, k8, 0, K < 8 ? nr : c8, NR, dst);
  if (K >= 8)
    for (int64_t c = c8; c < nr; ++c) {
      const float* s = base + c * cs;
      for (int64_t k = 0; k < K; ++k) dst[k * NR + c] = s[k];
    }
}

// Rows per step when a block of a row-major B is packed a few rows at a time across its panels.
constexpr int64_t kPackRowChunk = 8;

}  // namespace

void pack_b_panel(const MatrixRef& b, int64_t K, int64_t j0, int64_t nr, int64_t NR, float* dst) {
  const int64_t rs = b.row_stride, cs = b.col_stride;
  if (cs == 1) return pack_b_rows(b, 0, K, j0, nr, NR, dst);
  const float* base = b.data + j0 * cs;
  if (nr < NR)
    for (int64_t k = 0; k < K; ++k) std::fill(dst + k * NR + nr, dst + (k + 1) * NR, 0.0f);
  if (rs == 1) return pack_b_panel_transposed(base, cs, K, nr, NR, dst);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < nr; ++c) dst[k * NR + c] = base[k * rs + c * cs];
}

void pack_b_block(const MatrixRef& b, int64_t K, int64_t j0, int64_t ncols, int64_t NR,
                  float* dst) {
  const int64_t panels = (ncols + NR - 1) / NR;
  auto width = [&](int64_t q) { return std::min(NR, ncols - q * NR); };
  if (b.col_stride != 1) {
    // Panel by panel, each read down its K rows (a transposed B's columns are runs along K).
    for (int64_t q = 0; q < panels; ++q)
      pack_b_panel(b, K, j0 + q * NR, width(q), NR, dst + q * K * NR);
    return;
  }
  // Row-major B: kPackRowChunk rows at a time, each to every panel, so that a row's run of the
  // block is read while it is in L1. Reading down one panel at a time instead (two lines a row,
  // rows a row stride apart, often a multiple of 4 KiB, so every row lands in the same cache
  // sets) was 1.25x slower from L3 and 1.4x from DRAM (1024 x 256 blocks of a 1024 x 4096 and
  // a 1024 x 65536 B on an Emerald Rapids); one row at a time to all panels
  // 1.05-1.25x slower.
  const int64_t full = NR == 16 || NR == 32 ? ncols / NR : 0;
  for (int64_t k0 = 0; k0 < K; k0 += kPackRowChunk) {
    const int64_t k1 = std::min(K, k0 + kPackRowChunk);
    if (NR == 16) pack_b_full_panels16(b.data + j0, b.row_stride, k0, k1, full, K, dst);
    if (NR == 32) pack_b_full_panels32(b.data + j0, b.row_stride, k0, k1, full, K, dst);
    for (int64_t q = full; q < panels; ++q)
      pack_b_rows(b, k0, k1, j0 + q * NR, width(q), NR, dst + q * K * NR);
  }
}

void copy_b_rowmajor(const MatrixRef& b, int64_t K, int64_t N, float* dst) {
  // A transposed B (x @ w.T) through the 8x8 transposes: element by element the copy took
  // about as long as the direct kernel's GEMM (Zen 3, one thread, against OpenBLAS with the same
  // layouts: 23x57x91 1.11x, 16^3 1.50x, 64^3 1.17x; with B row-major 2.19x, 3.13x, 1.45x).
  if (b.row_stride == 1) return pack_b_panel_transposed(b.data, b.col_stride, K, N, N, dst);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) dst[k * N + j] = b.data[k * b.row_stride + j * b.col_stride];
}

namespace {

// transpose_rows_into for N rows of S: C's rows store exactly their N floats (store_first). On
// an AMD Zen 1 the vmaskmovps stores they replace took ~110 cycles per 8x8 block: 1000 x 2-8
// transposed in 5.4-5.7 us (1.0-1.45 us so).
template <int N>
__attribute__((target("avx"))) void transpose_rows_n(const float* s, int64_t ss, int64_t M,
                                                     float* c, int64_t ldc) {
  // Eight columns of S a step through the 8x8 transpose, rows past N reading row 0 again.
  int64_t i = 0;
  for (; i + 8 <= M; i += 8) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(s + (j < N ? j : 0) * ss + i);
    transpose8x8_regs(r);
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) store_first<N>(c + (i + q) * ldc, r[q]);
  }
  for (; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = s[j * ss + i];
}

}  // namespace

void transpose_rows_into(const float* s, int64_t ss, int64_t N, int64_t M, float* c, int64_t ldc) {
  KILN_CHECK(N >= 1 && N <= 8) << "transpose_rows_into takes 1-8 rows, not " << N;
  using Fn = void (*)(const float*, int64_t, int64_t, float*, int64_t);
  static constexpr Fn kByRows[8] = {transpose_rows_n<1>, transpose_rows_n<2>, transpose_rows_n<3>,
                                    transpose_rows_n<4>, transpose_rows_n<5>, transpose_rows_n<6>,
                                    transpose_rows_n<7>, transpose_rows_n<8>};
  kByRows[N - 1](s, ss, M, c, ldc);
}

void transpose_into(const float* s, int64_t ss, int64_t N, int64_t M, float* c, int64_t ldc) {
  KILN_CHECK(N >= 1) << "transpose_into takes at least one row, not " << N;
  if (N <= 8) return transpose_rows_into(s, ss, N, M, c, ldc);
  for (int64_t i0 = 0; i0 < M; i0 += kTransposeBlockRows) {
    const int64_t m = std::min(kTransposeBlockRows, M - i0);
    for (int64_t j0 = 0; j0 < N; j0 += 8)
      transpose_rows_into(s + j0 * ss + i0, ss, std::min<int64_t>(8, N - j0), m, c + i0 * ldc + j0,
                          ldc);
  }
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
    buffers.ptr[s] = static_cast<float*>(std::aligned_alloc(64, bytes + kPackPrefetchSlackBytes));
    if (!buffers.ptr[s]) throw std::bad_alloc();
    buffers.cap[s] = bytes / sizeof(float);
  }
  return buffers.ptr[s];
}

}  // namespace kiln::x86
