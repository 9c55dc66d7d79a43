// The GEMM fuzzer's draw: problems whose shapes, strides, epilogues, thread counts and cache
// sizes sit on the path-selection rules' boundaries, by recipe (each recipe aims at some rules).
#pragma once

#include "gemm_fuzz_case.h"
#include "gemm_fuzz_params.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace kiln::x86::fuzz {

using namespace kiln::x86::testing;

// ----------------------------------------------------------------------------------------------
// The draw.

class Draw {
 public:
  explicit Draw(uint64_t seed) : g_(seed) {}
  int64_t range(int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(g_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g_) < p; }
  template <typename T>
  T pick(std::initializer_list<T> v) {
    return *(v.begin() + range(0, int64_t(v.size()) - 1));
  }
  template <typename T>
  T pick(const std::vector<T>& v) {
    return v[size_t(range(0, int64_t(v.size()) - 1))];
  }
  uint32_t u32() { return uint32_t(g_()); }

 private:
  std::mt19937_64 g_;
};

inline const std::vector<int64_t> kTiles = {13, 14, 15, 27, 28, 29, 31, 32, 33, 63, 64, 65, 5,
                                            6,  7,  8,  9,  12, 16, 17, 47, 48, 49, 95, 96, 97};
// Rows: dot (8), page-apart skinny and direct_k few rows (12), skinny (16, 32), few_rows (24, 60,
// 66 on AVX2 tiles), MR multiples (14, 28, 42, 6, 12), wide_and_tall (1000), 16 row tiles a
// thread (split M: 16 * 14 * T, 16 * 6 * T).
inline const std::vector<int64_t> kRowMarks = {
    1,   2,   3,   4,   7,   8,   9,   11,  12,  13,  14,  15,  16,  17,  23,   24,  25,
    31,  32,  33,  41,  42,  43,  59,  60,  61,  65,  66,  67,  95,  96,  97,   191, 192,
    193, 223, 224, 225, 447, 448, 449, 511, 512, 513, 671, 672, 673, 999, 1000, 1001};
// Columns: dot a_rows (4), tiles (16, 32, 48, 64), direct_k (100, 128, 256), wide_and_tall
// (128), stream (256, 4096), B rows a page apart (1024).
inline const std::vector<int64_t> kColMarks = {1,   2,   3,    4,    5,    15,   16,   17,   31,
                                               32,  33,  47,   48,   49,   63,   64,   65,   99,
                                               100, 101, 127,  128,  129,  255,  256,  257,  511,
                                               512, 513, 1016, 1017, 1023, 1024, 1025, 2047, 2048};
inline const std::vector<int64_t> kKMarks = {
    1,   2,   15,  16,  17,   31,   32,   33,   63,   64,   65,   127, 128, 129,
    255, 256, 257, 299, 300,  301,  383,  384,  385,  511,  512,  513, 599, 600,
    601, 899, 900, 901, 1023, 1024, 1025, 1200, 1536, 2047, 2048, 2049};

inline int64_t near(Draw& d, int64_t v) { return std::max<int64_t>(0, v + d.range(-2, 2)); }

inline int64_t dim_any(Draw& d, const std::vector<int64_t>& marks) {
  switch (d.range(0, 9)) {
    case 0:
    case 1:
      return d.range(0, 33) == 0 ? 0 : d.range(1, 33);
    case 2:
    case 3:
      return d.pick(kTiles);
    case 4:
    case 5:
    case 6:
      return d.pick(marks);
    case 7:
      return near(d, d.pick(marks));
    case 8:
      return d.range(34, 300);
    default:
      return d.range(300, 2100);
  }
}

inline OpSpec layout_any(Draw& d) {
  return OpSpec{int(d.pick({0, 0, 1, 1, 2, 3, 4, 4, 5, 5, 6})), 0, 0};
}
inline OpSpec unit_cols(Draw& d) {  // column stride 1
  return OpSpec{int(d.pick({0, 0, 0, 4, 5})), 0, 0};
}
inline OpSpec unit_rows(Draw& d) {  // row stride 1 (transposed)
  return OpSpec{int(d.pick({1, 1, 6})), 0, 0};
}
// Rows 4 KiB, 8 KiB or 2 KiB apart (or a line more), forward or reversed; columns unit-stride.
inline OpSpec page_rows(Draw& d, int64_t cols) {
  int64_t rs = d.pick<int64_t>({1024, 1024, 2048, 2048, 512, 1040, 1025, 4096});
  if (rs < cols && d.chance(0.7)) rs = (cols + 1023) / 1024 * 1024;  // no overlap, mostly
  if (d.chance(0.25)) rs = -rs;
  return OpSpec{kCustom, rs, 1};
}
// Columns 4 KiB / 8 KiB apart, rows unit-stride (a transposed view of page-apart rows).
inline OpSpec page_cols(Draw& d, int64_t rows) {
  int64_t cs = d.pick<int64_t>({1024, 2048, 1040});
  if (cs < rows) cs = (rows + 1023) / 1024 * 1024;
  return OpSpec{kCustom, 1, cs};
}
inline OpSpec weird(Draw& d, int64_t rows, int64_t cols) {
  switch (d.range(0, 5)) {
    case 0:
      return OpSpec{kCustom, cols + d.range(0, 40), d.pick<int64_t>({1, 1, 2})};
    case 1:
      return OpSpec{kCustom, -(cols + d.range(0, 40)), 1};
    case 2:
      return OpSpec{kCustom, 1, rows + d.range(0, 40)};
    case 3:
      return OpSpec{kCustom, cols, -1};  // reversed columns
    case 4:
      return OpSpec{kCustom, d.pick<int64_t>({0, 1}), 0};  // one element or a column broadcast
    default:
      return OpSpec{kCustom, d.range(-3, 3) * cols + d.range(-3, 3), d.range(-2, 3)};
  }
}

// Bounds: M*N*K (time), elements of each operand's span and of C (memory).
inline void bound(Params& P, Draw& d) {
  // Dense operands within kDenseMaxElems; sparse ones (huge strides) within 1.2e9 elements of
  // address space (4.8 GB, mapped without reserve) and 2e6 elements (as many pages) written.
  constexpr double kMaxVolume = 3e8;
  auto fits = [](int64_t rows, int64_t cols, const OpSpec& o) {
    const double span = span_elems(rows, cols, o);
    return span <= kDenseMaxElems ||
           (o.kind == kCustom && span <= 1.2e9 && double(rows) * double(cols) <= 2e6);
  };
  for (int guard = 0; guard < 64; ++guard) {
    const double vol = double(P.M) * double(P.N) * double(P.K);
    const bool ok = vol <= kMaxVolume && fits(P.M, P.K, P.a) && fits(P.K, P.N, P.b) &&
                    double(P.M) * double(P.N + P.c_pad) <= kDenseMaxElems &&
                    double(P.K) * double(P.N) <= 8e6 && double(P.M) * double(P.N) <= 6e6;
    if (ok) return;
    // Halve the largest dimension (not below 1), keeping the marks' neighborhoods now and then.
    int64_t* big = &P.M;
    if (P.N > *big) big = &P.N;
    if (P.K > *big) big = &P.K;
    *big = std::max<int64_t>(1, d.chance(0.5) ? *big / 2 : *big * 2 / 3);
  }
}

// The custom stride specs of rows/cols wider than the operand may overlap rows; that is allowed
// (strides may be any value). Where a custom stride was chosen for other dims, fix it up lightly.
inline Params draw(Draw& d) {
  Params P;
  static const char* const kRecipes[] = {
      "any",        "tiny",        "direct",      "stream",      "column_as_row", "dot_a_rows",
      "dot_b_rows", "skinny",      "skinny_page", "direct_rows", "direct_k",      "packed",
      "few_rows",   "rows_outer",  "k_split",     "long_k",      "wide_tall",     "a_alias",
      "big",        "huge_stride", "degenerate",  "dynamic",     "transposed",    "stream_rows"};
  const int r = int(d.range(0, int64_t(sizeof(kRecipes) / sizeof(kRecipes[0])) - 1));
  P.recipe = kRecipes[r];
  P.a = layout_any(d);
  P.b = layout_any(d);
  const std::string rc = P.recipe;
  if (rc == "any") {
    P.M = dim_any(d, kRowMarks), P.N = dim_any(d, kColMarks), P.K = dim_any(d, kKMarks);
    if (d.chance(0.15)) P.a = weird(d, P.M, P.K);
    if (d.chance(0.15)) P.b = weird(d, P.K, P.N);
  } else if (rc == "tiny") {
    P.M = d.range(0, 33), P.N = d.range(0, 33), P.K = d.range(0, 33);
    if (d.chance(0.2)) P.a = weird(d, P.M, P.K);
    if (d.chance(0.2)) P.b = weird(d, P.K, P.N);
  } else if (rc == "direct") {
    P.M = d.range(1, 64), P.N = d.range(1, 64), P.K = d.range(1, 64);
    if (d.chance(0.5)) P.M = d.pick(kTiles);
    if (d.chance(0.3)) P.a = page_rows(d, P.K);
  } else if (rc == "stream") {
    P.M = 1;
    P.N = d.chance(0.5) ? d.pick(kColMarks) : d.range(1, 5000);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 3000);
    P.b = d.chance(0.3) ? page_rows(d, P.N) : unit_cols(d);
    if (P.b.kind == kCustom) P.b.rs = std::llabs(P.b.rs);
    if (d.chance(0.5)) P.dyn_m = true;  // M symbolic: the stream path within the small volume
  } else if (rc == "column_as_row") {
    P.N = 1;
    P.M = d.chance(0.5) ? d.pick(kRowMarks) : d.range(2, 5000);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 3000);
    P.a = d.chance(0.3) ? page_cols(d, P.M) : unit_rows(d);
    P.c_pad = 0, P.r_pad = 0;
  } else if (rc == "transposed") {
    // x.T @ w with a few columns (transposed_path.cpp), and just past them; or up to and past
    // the 64 a tall C takes there on Zen's AVX2 rules (wide_pays).
    const bool wide = d.chance(0.3);
    P.N = wide ? d.range(9, 70) : d.range(1, 10);
    P.M = d.chance(0.5) ? d.pick(kRowMarks) : d.range(2, wide ? 2000 : 3000);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 3000);
    P.a = d.chance(0.2) ? page_cols(d, P.M) : unit_rows(d);
  } else if (rc == "dot_a_rows") {
    P.N = d.range(1, 9);  // 5-8: AVX-512 with many rows (kDotMaxColsWide)
    P.M = d.chance(0.5) ? d.pick(kRowMarks) : d.range(1, 4000);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 3000);
    P.a = d.chance(0.3) ? page_rows(d, P.K) : unit_cols(d);
    if (d.chance(0.3)) P.c_pad = 0;
  } else if (rc == "dot_b_rows") {
    P.M = d.range(1, 9);
    P.N = d.chance(0.5) ? d.pick(kColMarks) : d.range(1, 4000);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 3000);
    P.b = d.chance(0.3) ? page_cols(d, P.K) : unit_rows(d);
  } else if (rc == "skinny" || rc == "skinny_page") {
    P.M = d.pick<int64_t>({2, 3, 4, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 24, 31, 32, 33});
    P.N = d.chance(0.5) ? d.pick(kColMarks) : d.range(64, 2100);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(16, 2100);
    P.b = rc == "skinny_page" ? page_rows(d, P.N) : unit_cols(d);
    if (rc == "skinny_page" && d.chance(0.4))
      P.N = std::max<int64_t>(P.N, 1024), P.b = OpSpec{0, 0, 0};
  } else if (rc == "stream_rows") {
    // A few rows over B's rows a page or more apart (stream_path.cpp, stream_rows_for), planned
    // for a Zen 3's rules (AVX2 takes the stream path there), and just past its bounds.
    P.M = d.range(2, 14);
    P.N = d.chance(0.5) ? d.range(1000, 4200) : d.range(1, 100);
    P.K = d.chance(0.3) ? d.pick<int64_t>({28, 31, 32, 33, 34, 35, 64}) : d.range(28, 2100);
    P.b = P.N < 1024 || d.chance(0.4) ? page_rows(d, P.N) : unit_cols(d);
    if (d.chance(0.3)) P.a = d.chance(0.5) ? unit_rows(d) : weird(d, P.M, P.K);
    P.caches = cache_index("zen3_rules");
  } else if (rc == "direct_rows") {
    P.M = d.chance(0.5) ? d.pick(kRowMarks) : d.range(65, 2100);
    P.N = d.chance(0.5) ? d.pick<int64_t>({8, 16, 17, 24, 32, 48, 63, 64, 65, 96, 100, 127, 128,
                                           129, 130, 160, 256})
                        : d.range(1, 260);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 600);
    P.a = unit_cols(d), P.b = unit_cols(d);
    if (d.chance(0.25)) P.a = page_rows(d, P.K);
  } else if (rc == "direct_k") {
    // A small C (k_split.cpp's direct_k_fits: AVX2 M*N <= 4096 with N <= 128 or M*N <= 16384
    // with N <= 100; AVX-512 twice that, N <= 256 / 128), and now and then just past it.
    P.N = d.chance(0.5) ? d.pick<int64_t>({1, 5, 8, 16, 17, 32, 48, 64, 99, 100, 101, 127, 128, 129,
                                           200, 256, 257})
                        : d.range(1, 260);
    const int64_t cap = d.pick<int64_t>({4096, 16384, 32768});
    P.M = std::max<int64_t>(1, std::min<int64_t>(d.range(1, 2100), cap / P.N + d.range(-1, 1)));
    if (d.chance(0.3)) P.M = d.pick(kRowMarks);
    P.K = d.pick<int64_t>({256, 300, 512, 600, 601, 900, 1024, 1025, 2047, 2048, 2049, 2100, 4096,
                           4097, 6000, 8192, 16384}) +
          d.range(-1, 1);
    P.a = unit_cols(d), P.b = unit_cols(d);
    if (d.chance(0.25)) P.a = page_rows(d, P.K);
  } else if (rc == "packed") {
    P.M = d.chance(0.5) ? d.pick(kRowMarks) : d.range(33, 1200);
    P.N = d.chance(0.5) ? d.pick(kColMarks) : d.range(33, 1200);
    P.K = d.chance(0.5) ? d.pick(kKMarks) : d.range(1, 1200);
    if (d.chance(0.2)) P.a = weird(d, P.M, P.K);
    if (d.chance(0.2)) P.b = weird(d, P.K, P.N);
  } else if (rc == "few_rows") {
    P.M = d.pick<int64_t>({13, 17, 20, 24, 25, 30, 33, 40, 48, 56, 60, 61, 64, 66, 67, 72});
    P.N = d.pick<int64_t>({512, 1000, 1024, 1500, 2048, 2100});
    P.K = d.pick<int64_t>({256, 512, 513, 1024, 1100, 2048});
    P.caches = int(d.pick<int64_t>({1, 1, 2, 4}));
  } else if (rc == "rows_outer") {
    P.M = d.range(33, 2100), P.N = d.range(65, 2100);
    P.K = d.pick<int64_t>({1, 8, 16, 31, 32, 48, 64, 96, 127, 128, 129});
  } else if (rc == "k_split") {
    P.M = d.range(16, 256), P.N = d.range(16, 256);
    P.K = d.pick<int64_t>({1024, 1025, 2047, 2048, 3000, 4096, 4100, 8192});
    if (d.chance(0.6)) P.a = unit_rows(d);  // direct_k reads a transposed A in place too
    P.threads = int(d.pick<int64_t>({2, 3, 4}));
  } else if (rc == "long_k") {
    P.threads = int(d.pick<int64_t>({1, 2}));
    P.M = d.range(500, 1300) * P.threads, P.N = d.range(16, 256);
    P.K = d.pick<int64_t>({1024, 1025, 1200, 2048, 2049});
  } else if (rc == "wide_tall") {
    P.M = d.pick<int64_t>({999, 1000, 1001, 1500, 2048});
    P.N = d.range(96, 300), P.K = d.pick<int64_t>({16, 64, 100, 150, 200, 255});
    P.a = unit_cols(d), P.b = unit_cols(d);
  } else if (rc == "a_alias") {
    P.M = d.pick<int64_t>({9, 11, 12, 13, 14, 16, 17, 20, 24, 28, 29, 33, 61, 100, 300, 1000});
    P.N = d.pick<int64_t>({1, 5, 8, 10, 16, 17, 24, 32, 48, 64, 65, 100});
    P.K = d.pick<int64_t>({128, 256, 512, 1000, 1024, 2048, 4096});
    P.a = page_rows(d, P.K);
    P.b = unit_cols(d);
    if (d.chance(0.5)) P.caches = int(d.pick<int64_t>({2, 3}));
  } else if (rc == "huge_stride") {
    // Strides at the displacement limits of the generated code (gemm_driver.cpp's
    // direct_disp_fits: 2^28 elements over a direct kernel's rows and K; stream_path.cpp's
    // stream_fits: 5 rows of B; dot_path.cpp's dot_fits: 7 rows of X in 2^31 bytes), just under,
    // at and over them (the problem then takes another path).
    const double f = d.pick<double>({0.5, 0.9, 0.9999, 1.0, 1.0001, 1.1, 2.0});
    const double lim28 = double(int64_t(1) << 28), dot_lim = double(int64_t(1) << 31) / 28;
    auto stride = [&](double s) { return std::max<int64_t>(1, int64_t(s * f)); };
    switch (d.range(0, 6)) {
      case 0:  // A's rows: direct (the small volume), direct_rows, direct_k, skinny
      case 1:
        P.M = d.chance(0.5) ? d.range(2, 40) : d.pick(kRowMarks);
        P.K = d.chance(0.5) ? d.range(1, 300) : d.pick(kKMarks);
        P.N = d.chance(0.5) ? d.range(1, 100) : d.pick(kColMarks);
        P.a = OpSpec{kCustom, stride(lim28 / double(std::max<int64_t>(1, P.M))), 1};
        if (d.chance(0.3)) P.a.rs = -P.a.rs;
        P.b = unit_cols(d);
        break;
      case 2:  // B's rows: direct, skinny, direct_rows
        P.M = d.chance(0.5) ? d.range(1, 33) : d.pick(kRowMarks);
        P.K = d.range(1, 400), P.N = d.chance(0.5) ? d.range(1, 300) : d.pick(kColMarks);
        P.b = OpSpec{kCustom, stride(lim28 / double(P.K + 16)), 1};
        if (d.chance(0.3)) P.b.rs = -P.b.rs;
        P.a = unit_cols(d);
        break;
      case 3:  // stream: B's rows
        P.M = 1, P.K = d.range(1, 6), P.N = d.chance(0.5) ? d.range(1, 5000) : d.pick(kColMarks);
        P.b = OpSpec{kCustom, stride(lim28 / 5), 1};
        if (d.chance(0.5)) P.dyn_m = true;
        break;
      case 4:  // A's columns (a transposed A): direct, packed, transposed (2-8 columns)
        P.M = d.range(1, 64), P.K = d.range(1, 300);
        P.N = d.chance(0.5) ? d.range(2, 8) : d.range(1, 64);
        P.a = OpSpec{kCustom, 1, stride(lim28 / double(P.K + 16))};
        break;
      case 5:  // dot b_rows: X = B's columns (x @ W.T)
        P.M = d.range(1, 8), P.N = d.range(1, 4), P.K = d.range(1, 2000);
        P.b = OpSpec{kCustom, 1, stride(dot_lim)};
        break;
      default:  // dot a_rows: X = A's rows
        P.N = d.pick<int64_t>({1, 1, 2, 3, 4}), P.K = d.range(1, 2000);
        P.M = P.N == 1 ? d.range(1, 12) : d.range(8, 12);
        P.a = OpSpec{kCustom, stride(dot_lim), 1};
        break;
    }
  } else if (rc == "degenerate") {
    // Dimensions of 0 and 1 beside any other, on every path's entry (dynamic and prepacked
    // plans too: the small volume's direct kernel does not take those).
    P.M = dim_any(d, kRowMarks), P.N = dim_any(d, kColMarks), P.K = dim_any(d, kKMarks);
    for (int64_t* x : {&P.M, &P.N, &P.K})
      if (d.chance(0.4)) *x = d.pick<int64_t>({0, 1, 1});
    if (d.chance(0.15)) P.a = weird(d, P.M, P.K);
    if (d.chance(0.15)) P.b = weird(d, P.K, P.N);
  } else if (rc == "dynamic") {
    // Symbolic extents (GemmProblem::dynamic_m / dynamic_nk) on every shape class.
    P.M = d.chance(0.5) ? d.range(0, 40) : dim_any(d, kRowMarks);
    P.N = dim_any(d, kColMarks), P.K = dim_any(d, kKMarks);
  } else {  // big
    P.M = d.range(1, 2100), P.N = d.range(1, 2100), P.K = d.range(1, 2100);
  }
  // Perturb around the marks now and then.
  if (d.chance(0.1)) P.M = near(d, P.M);
  if (d.chance(0.1)) P.N = near(d, P.N);
  if (d.chance(0.1)) P.K = near(d, P.K);
  // C's rows: N + 3 (the header's), contiguous, a few more, or 4 / 8 KiB apart.
  if (P.c_pad == 3) {
    switch (d.range(0, 9)) {
      case 0:
      case 1:
        P.c_pad = 0;
        break;
      case 2:
        P.c_pad = d.range(1, 17);
        break;
      case 3:
        P.c_pad = std::max<int64_t>(0, 1024 - P.N) + (P.N > 1024 ? 1024 - P.N % 1024 : 0);
        break;
      case 4:
        P.c_pad = std::max<int64_t>(0, 2048 - P.N);
        break;
      default:
        break;
    }
  }
  if (P.r_pad == 5) {
    switch (d.range(0, 5)) {
      case 0:
        P.r_pad = -1;  // one row broadcast
        break;
      case 1:
        P.r_pad = 0;
        break;
      case 2:
        P.r_pad = d.range(1, 40);
        break;
      default:
        P.r_pad = P.c_pad ? P.c_pad + 2 : 0;  // the header's
        break;
    }
  }
  P.act = int(d.range(0, 4));
  P.bias = d.chance(0.5);
  P.residual = d.chance(0.4);
  P.gate = P.residual && d.chance(0.4);
  P.col_scale = d.chance(0.3);
  P.scale = d.chance(0.5) ? 1.0f : d.pick<float>({0.75f, 0.75f, -1.5f, 2.0f, 0.5f});
  // (A huge stride reaches the limits only where B is read in place, the plan not dynamic.)
  const bool huge = rc == "huge_stride";
  P.prepacked = !huge && d.chance(0.15);
  if (P.recipe != "k_split" && P.recipe != "long_k")
    P.threads = int(d.chance(0.9) ? d.range(1, 3) : d.pick<int64_t>({4, 8}));
  if (P.caches == 0 && d.chance(0.35))
    P.caches = int(d.range(1, int64_t(cache_choices().size()) - 1));
  const bool dyn = rc == "dynamic" || rc == "degenerate";
  if (!huge && d.chance(dyn ? 0.6 : 0.12)) P.dyn_m = true;
  if (!huge && d.chance(dyn ? 0.4 : 0.08)) P.dyn_nk = true;
  P.api = d.chance(0.2);
  P.data_seed = d.u32() % 1000000;
  bound(P, d);
  return P;
}

}  // namespace kiln::x86::fuzz
