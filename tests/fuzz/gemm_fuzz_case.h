// The GEMM fuzzer's problem in any layout (FuzzCase), for what testing::Case does not build
// (custom strides, C's row stride, a scale other than 0.75, a prepacked B, larger shapes): its
// operands are testing::Operand's (custom strides in place of the named layouts); it mirrors
// Case's C buffer (sentinel-filled, checked outside C) and tolerance, and computes the reference
// once per problem instead of once per run. Its GEMM reads copies of A, B, the bias and the
// residual placed against an inaccessible page (reads past them fault), checks that they are
// unchanged, and maps operands of huge strides sparsely (the displacement limits of the generated
// code). header_case_fits: whether testing::Case runs a problem as it is instead.
#pragma once

#include "gemm_fuzz_params.h"
#include "x86_gemm_testing.h"

#include "codegen/x86/gemm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace kiln::x86::fuzz {

using namespace kiln::x86::testing;

// ----------------------------------------------------------------------------------------------
// Operands and the check.

// An operand of the header's layouts, or with custom strides (any sign, rows may overlap) over a
// buffer that spans exactly its elements, from an unaligned start.
inline Operand make_operand(int64_t rows, int64_t cols, const OpSpec& o, Rng& rng) {
  if (o.kind < kCustom) {
    // reversed_rows of no rows would point before its (empty) buffer.
    const bool empty_rev = rows == 0 && Layout(o.kind) == Layout::reversed_rows;
    return Operand(rows, cols, empty_rev ? Layout::row_major : Layout(o.kind), rng);
  }
  Operand op(0, 0, Layout::row_major, rng);
  int64_t lo = 0, hi = 0;
  if (rows > 0 && cols > 0) {
    lo = std::min<int64_t>(0, o.rs * (rows - 1)) + std::min<int64_t>(0, o.cs * (cols - 1));
    hi = std::max<int64_t>(0, o.rs * (rows - 1)) + std::max<int64_t>(0, o.cs * (cols - 1));
  }
  constexpr int64_t kLead = 3;
  op.storage.assign(size_t(kLead + hi - lo + 1 + kLead), 0.0f);
  for (float& v : op.storage) v = rng.uniform();
  op.ref = MatrixRef{op.storage.data() + kLead - lo, o.rs, o.cs};
  return op;
}

struct Violation {
  double worst = 0;  // max |got - want| / tol; infinity: outside C written, or not finite
  std::string what;  // where
};

// A copy of n floats in memory of its own that ends (or, at_start, begins) at an inaccessible
// page: a kernel that reads past the operand's last (first) element faults there.
class Guarded {
 public:
  Guarded() = default;
  // src nullptr: zeros, the pages made as they are touched (a sparse operand of huge strides).
  Guarded(const float* src, int64_t n, bool at_start) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t bytes = size_t(n) * sizeof(float), body = (bytes + page - 1) / page * page;
    len_ = body + 2 * page;
    void* m = mmap(nullptr, len_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("mmap");
      std::abort();
    }
    base_ = static_cast<char*>(m);
    mprotect(base_, page, PROT_NONE);
    mprotect(base_ + page + body, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(at_start ? base_ + page : base_ + page + body - bytes);
    if (n > 0 && src) std::memcpy(data_, src, bytes);
    n_ = src ? n : 0;
  }
  Guarded(Guarded&& o) noexcept { *this = std::move(o); }
  Guarded& operator=(Guarded&& o) noexcept {
    std::swap(base_, o.base_), std::swap(len_, o.len_), std::swap(data_, o.data_),
        std::swap(n_, o.n_);
    return *this;
  }
  ~Guarded() {
    if (base_) munmap(base_, len_);
  }
  float* data() const { return data_; }
  bool same_as(const float* src) const {
    return n_ == 0 || std::memcmp(data_, src, size_t(n_) * sizeof(float)) == 0;
  }

 private:
  char* base_ = nullptr;
  size_t len_ = 0;
  float* data_ = nullptr;
  int64_t n_ = 0;
};

// The elements [lo, hi] (offsets from ref.data) a rows x cols operand spans; hi < lo if none.
inline std::pair<int64_t, int64_t> span_of(const MatrixRef& r, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return {0, -1};
  return {std::min<int64_t>(0, r.row_stride * (rows - 1)) +
              std::min<int64_t>(0, r.col_stride * (cols - 1)),
          std::max<int64_t>(0, r.row_stride * (rows - 1)) +
              std::max<int64_t>(0, r.col_stride * (cols - 1))};
}

// Operands spanning more elements than this (custom strides only) are sparse: their buffer is
// mapped, not filled, and only their elements are written (see the huge_stride recipe).
constexpr double kDenseMaxElems = 2.4e7;
inline double span_elems(int64_t rows, int64_t cols, const OpSpec& o) {
  if (o.kind < kCustom) return double(rows) * double(cols + 8) + double(cols) * 8;
  return double(std::llabs(o.rs)) * double(std::max<int64_t>(0, rows - 1)) +
         double(std::llabs(o.cs)) * double(std::max<int64_t>(0, cols - 1)) + 1;
}
inline bool is_sparse(int64_t rows, int64_t cols, const OpSpec& o) {
  return o.kind == kCustom && rows > 0 && cols > 0 && span_elems(rows, cols, o) > kDenseMaxElems;
}

// One problem in any layout: A and B (testing::Operand, for the reference), C in a sentinel-filled
// buffer with guards, bias, residual; the reference computed once. The GEMM reads copies of A, B,
// the bias and the residual that span exactly their elements, against an inaccessible page (after
// them, or before them for half of the problems with a seed of odd hash): reads outside fault.
class FuzzCase {
 public:
  explicit FuzzCase(const Params& P)
      : P_(P),
        rng_(P.data_seed),
        a_sparse_(is_sparse(P.M, P.K, P.a)),
        b_sparse_(is_sparse(P.K, P.N, P.b)),
        a_(a_sparse_ ? make_operand(0, 0, OpSpec{}, rng_) : make_operand(P.M, P.K, P.a, rng_)),
        b_(b_sparse_ ? make_operand(0, 0, OpSpec{}, rng_) : make_operand(P.K, P.N, P.b, rng_)) {
    ldc_ = P.N + P.c_pad;
    c_off_ = 16 + int64_t(P.data_seed % 7);
    const int64_t c_elems = P.M > 0 ? (P.M - 1) * ldc_ + P.N : 0;
    c_.assign(size_t(c_off_ + c_elems + 64), kSentinel);
    bias_.resize(size_t(P.N + 1));
    for (float& v : bias_) v = rng_.uniform();
    ldr_ = P.r_pad < 0 ? 0 : P.N + P.r_pad;
    res_.resize(size_t(std::max<int64_t>(0, P.M - 1) * ldr_ + P.N + 1));
    for (float& v : res_) v = rng_.uniform();
    const bool at_start = (P.data_seed / 7) % 4 == 0;
    auto guard = [&](const MatrixRef& r, int64_t rows, int64_t cols, Guarded& g, int64_t& lo,
                     int64_t& n) {
      const auto [l, h] = span_of(r, rows, cols);
      lo = l, n = h - l + 1;
      g = Guarded(r.data + l, n, at_start);
      return MatrixRef{g.data() - l, r.row_stride, r.col_stride};
    };
    // A sparse operand: its elements written into a mapping of its span, and kept to compare.
    auto sparse = [&](const OpSpec& o, int64_t rows, int64_t cols, Guarded& g,
                      std::vector<float>& values) {
      const MatrixRef shape{nullptr, o.rs, o.cs};
      const auto [l, h] = span_of(shape, rows, cols);
      g = Guarded(nullptr, h - l + 1, at_start);
      const MatrixRef r{g.data() - l, o.rs, o.cs};
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          const_cast<float&>(r.data[i * r.row_stride + j * r.col_stride]) = rng_.uniform();
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          values.push_back(r.data[i * r.row_stride + j * r.col_stride]);
      return r;
    };
    ga_ref_ = a_sparse_ ? sparse(P.a, P.M, P.K, ga_, a_values_)
                        : guard(a_.ref, P.M, P.K, ga_, a_lo_, a_n_);
    gb_ref_ = b_sparse_ ? sparse(P.b, P.K, P.N, gb_, b_values_)
                        : guard(b_.ref, P.K, P.N, gb_, b_lo_, b_n_);
    int64_t lo = 0;
    gbias_ref_ = guard(MatrixRef{bias_.data(), 0, 1}, 1, P.N, gbias_, lo, bias_n_);
    gres_ref_ = guard(MatrixRef{res_.data(), ldr_, 1}, P.M, P.N, gres_, lo, res_n_);
  }

  MatrixRef b_ref() const { return gb_ref_; }
  // For --selftest: C's buffer, C at c_offset().
  std::vector<float>& c_buffer() { return c_; }
  int64_t c_offset() const { return c_off_; }

  GemmProblem problem() {
    std::fill(c_.begin(), c_.end(), kSentinel);
    GemmProblem p;
    p.M = P_.M, p.N = P_.N, p.K = P_.K;
    p.a = ga_ref_;
    p.b = gb_ref_;
    p.c = c_.data() + c_off_;
    p.ldc = ldc_;
    p.epi.bias = P_.bias ? gbias_ref_.data : nullptr;
    p.epi.scale = P_.scale;
    p.epi.act = Activation(P_.act);
    p.epi.residual = P_.residual ? gres_ref_.data : nullptr;
    p.epi.ld_residual = P_.residual ? ldr_ : 0;
    p.epi.residual_mul = P_.gate;
    p.epi.col_scale = P_.col_scale ? gbias_ref_.data : nullptr;
    p.dynamic_m = P_.dyn_m;
    p.dynamic_nk = P_.dyn_nk;
    return p;
  }

  // An element of an operand, as Operand::at reads it (the copies hold the same values).
  static double at(const MatrixRef& r, int64_t i, int64_t j) {
    return r.data[i * r.row_stride + j * r.col_stride];
  }
  // Whether a sparse operand still holds its elements.
  static bool same_values(const MatrixRef& r, int64_t rows, int64_t cols,
                          const std::vector<float>& values) {
    size_t n = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (r.data[i * r.row_stride + j * r.col_stride] != values[n++]) return false;
    return true;
  }

  // Each element by testing::expected_element (as testing::Case checks), B read into doubles once.
  void compute_reference() {
    const int64_t M = P_.M, N = P_.N, K = P_.K;
    want_.assign(size_t(M * N), 0.0);
    tol_.assign(size_t(M * N), 0.0);
    std::vector<double> bd(size_t(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) bd[size_t(k * N + j)] = at(gb_ref_, k, j);
    std::vector<double> sum(static_cast<size_t>(N)), mag(static_cast<size_t>(N));
    for (int64_t i = 0; i < M; ++i) {
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const double a = at(ga_ref_, i, k);
        const double* row = bd.data() + k * N;
        for (int64_t j = 0; j < N; ++j) {
          const double t = a * row[j];
          sum[size_t(j)] += t;
          mag[size_t(j)] += std::fabs(t);
        }
      }
      for (int64_t j = 0; j < N; ++j) {
        const Expected e =
            expected_element(sum[size_t(j)], mag[size_t(j)], K,
                             P_.scale * (P_.col_scale ? double(bias_[size_t(j)]) : 1.0),
                             P_.bias ? double(bias_[size_t(j)]) : 0.0, Activation(P_.act),
                             P_.residual, P_.residual ? res_[size_t(i * ldr_ + j)] : 0.0, P_.gate);
        want_[size_t(i * N + j)] = e.value;
        tol_[size_t(i * N + j)] = e.tolerance;
      }
    }
  }

  Violation check() const {
    Violation v;
    const int64_t M = P_.M, N = P_.N;
    for (size_t idx = 0; idx < c_.size(); ++idx) {
      const int64_t off = int64_t(idx) - c_off_;
      const bool inside = N > 0 && off >= 0 && off / ldc_ < M && off % ldc_ < N;
      if (!inside && c_[idx] != kSentinel) {
        std::ostringstream o;
        const int64_t ld = std::max<int64_t>(1, ldc_);
        o << "write outside C at element offset " << off << " from C (row "
          << (off >= 0 ? off / ld : -1) << ", col " << (off >= 0 ? off % ld : off)
          << "): " << c_[idx];
        v.worst = std::numeric_limits<double>::infinity();
        v.what = o.str();
        return v;
      }
    }
    const bool a_same =
        a_sparse_ ? same_values(ga_ref_, P_.M, P_.K, a_values_) : ga_.same_as(a_.ref.data + a_lo_);
    const bool b_same =
        b_sparse_ ? same_values(gb_ref_, P_.K, P_.N, b_values_) : gb_.same_as(b_.ref.data + b_lo_);
    if (!a_same || !b_same || !gbias_.same_as(bias_.data()) || !gres_.same_as(res_.data())) {
      v.worst = std::numeric_limits<double>::infinity();
      v.what = "an input (A, B, bias or residual) was modified";
      return v;
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        const double got = c_[size_t(c_off_ + i * ldc_ + j)];
        const double want = want_[size_t(i * N + j)];
        const double r = std::isfinite(got) ? std::fabs(got - want) / tol_[size_t(i * N + j)]
                                            : std::numeric_limits<double>::infinity();
        if (r > v.worst || (std::isnan(r) && v.what.empty())) {
          v.worst = std::isnan(r) ? std::numeric_limits<double>::infinity() : r;
          std::ostringstream o;
          o << "C(" << i << "," << j << ") = " << got << ", want " << want;
          v.what = o.str();
        }
      }
    }
    return v;
  }

 private:
  Params P_;
  Rng rng_;
  bool a_sparse_, b_sparse_;
  std::vector<float> a_values_, b_values_;  // a sparse operand's elements, in order
  Operand a_, b_;
  int64_t ldc_ = 0, ldr_ = 0, c_off_ = 0;
  std::vector<float> c_, bias_, res_;
  Guarded ga_, gb_, gbias_, gres_;
  MatrixRef ga_ref_, gb_ref_, gbias_ref_, gres_ref_;
  int64_t a_lo_ = 0, a_n_ = 0, b_lo_ = 0, b_n_ = 0, bias_n_ = 0, res_n_ = 0;
  std::vector<double> want_, tol_;
};

// Whether testing::Case builds this problem as it is: the header's layouts, its C (rows N + c_pad
// apart) and residual (c_pad + 2 apart, or N for c_pad 0, or broadcast), scale 0.75, a
// small reference (Case computes it once per run), B read in place.
constexpr int64_t kCaseVolume = int64_t(1) << 20;
inline bool header_case_fits(const Params& P) {
  const bool c_ok = P.c_pad >= 0;
  const bool r_ok = !P.residual || P.r_pad == -1 || P.r_pad == (P.c_pad ? P.c_pad + 2 : 0);
  return P.a.kind < kCustom && P.b.kind < kCustom && c_ok && r_ok &&
         (P.scale == 1.0f || P.scale == 0.75f) && !P.prepacked && P.M * P.N * P.K <= kCaseVolume &&
         !(P.M == 0 && Layout(P.a.kind) == Layout::reversed_rows);
}

}  // namespace kiln::x86::fuzz
