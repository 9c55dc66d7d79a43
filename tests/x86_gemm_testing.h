// Test support for the x86 GEMM: operands in several layouts, a double-accumulating reference
// with the same epilogue, and a tolerance check that also catches writes outside C.
#pragma once

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace kiln::x86::testing {

struct Shape {
  int64_t M, N, K;
};

// padded: unit-stride rows ld = cols + 7 apart, from an unaligned start; reversed_rows: the last
// row first (negative row stride), as a view x[::-1] gives; transposed_padded: unit-stride
// columns rows + 5 apart, from an unaligned start (a transposed view of a padded matrix);
// wide_padded: as padded, but rows at least 1029 floats apart (over a page, however narrow: a
// view of a few columns of a wide matrix).
enum class Layout {
  row_major,
  transposed,
  strided,
  broadcast_row,
  padded,
  reversed_rows,
  transposed_padded,
  wide_padded
};
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::row_major:
      return "row_major";
    case Layout::transposed:
      return "transposed";
    case Layout::strided:
      return "strided";
    case Layout::broadcast_row:
      return "broadcast_row";
    case Layout::padded:
      return "padded";
    case Layout::reversed_rows:
      return "reversed_rows";
    case Layout::transposed_padded:
      return "transposed_padded";
    case Layout::wide_padded:
      return "wide_padded";
  }
  return "?";
}

struct EpiKind {
  Activation act = Activation::none;
  bool bias = false, scale = false, residual = false;
  bool gate = false;       // the residual multiplies (GemmEpilogue::residual_mul)
  bool col_scale = false;  // a per-column scale (GemmEpilogue::col_scale)
};

// Four epilogues that between them use bias, scale, a residual added or multiplying, and
// activations of one pass (relu) and two (gelu, silu), with none: for the sweeps that cycle
// through them. (A column scale keeps a problem off direct_rows: x86_gemm_test.cpp covers it
// path by path.)
inline constexpr EpiKind kEpilogueCycle[4] = {EpiKind{},
                                              EpiKind{Activation::gelu, true, true, true},
                                              EpiKind{Activation::relu, true, false, true, true},
                                              EpiKind{Activation::silu, false, false, true}};

// The ISAs this CPU runs, capped by KILN_ISA (the suite's KILN_ISA=avx2 repeat then runs the AVX2
// kernels only: the plain run has run both); says once per process which it does not run (their
// kernels are then only generated and listed).
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    const bool capped = isa == Isa::avx512 && isa_supported(isa) && selected_isa() != Isa::avx512;
    if (isa_supported(isa) && !capped) {
      out.push_back(isa);
      continue;
    }
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr, "note: %s kernels are not run here: %s\n", isa_name(isa),
                   capped               ? "KILN_ISA caps the ISA below it"
                   : isa == Isa::avx512 ? "this CPU lacks AVX-512F"
                                        : "this CPU lacks AVX2 and FMA");
  }
  return out;
}

class Rng {
 public:
  explicit Rng(uint32_t seed) : s_(seed * 2654435761u + 12345u) {}
  float uniform() {  // [-1, 1)
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return float(int32_t(s_ >> 32)) * (1.0f / 2147483648.0f);
  }

 private:
  uint64_t s_;
};

// A [rows x cols] operand stored in a buffer of its own with a leading offset. line_shift >= 0
// moves its start to that many floats past a 64-byte line (else it lies where malloc put it).
struct Operand {
  std::vector<float> storage;
  MatrixRef ref;

  Operand(int64_t rows, int64_t cols, Layout layout, Rng& rng, int line_shift = -1) {
    int64_t rs = 0, cs = 0, offset = 0, size = 0;
    switch (layout) {
      case Layout::row_major:
        rs = cols, cs = 1, size = rows * cols;
        break;
      case Layout::transposed:
        rs = 1, cs = rows, size = rows * cols;
        break;
      case Layout::strided:
        rs = 2 * cols + 3, cs = 2, offset = 5, size = rows * rs;
        break;
      case Layout::broadcast_row:
        rs = 0, cs = 1, size = cols;
        break;
      case Layout::padded:
        rs = cols + 7, cs = 1, offset = 3, size = rows * rs;
        break;
      case Layout::reversed_rows:
        rs = -(cols + 1), cs = 1, offset = std::max<int64_t>(rows - 1, 0) * (cols + 1), size = cols;
        break;
      case Layout::transposed_padded:
        rs = 1, cs = rows + 5, offset = 3, size = cols * cs;
        break;
      case Layout::wide_padded:
        rs = std::max<int64_t>(cols, 1024) + 5, cs = 1, offset = 3, size = rows * rs;
        break;
    }
    storage.resize(size_t(offset + size + 1 + (line_shift >= 0 ? 16 : 0)));
    for (float& v : storage) v = rng.uniform();
    if (line_shift >= 0) {
      const int64_t off_line =
          int64_t(reinterpret_cast<uintptr_t>(storage.data() + offset) / 4 % 16);
      offset += (line_shift - off_line + 16) % 16;
    }
    ref = MatrixRef{storage.data() + offset, rs, cs};
  }
  double at(int64_t i, int64_t j) const {
    return ref.data[i * ref.row_stride + j * ref.col_stride];
  }
  float& mut(int64_t i, int64_t j) {
    return const_cast<float&>(ref.data[i * ref.row_stride + j * ref.col_stride]);
  }
};

inline double apply_act(Activation act, double y) {
  switch (act) {
    case Activation::none:
      return y;
    case Activation::relu:
      return y > 0 ? y : 0;
    case Activation::gelu:
      return 0.5 * y * (1.0 + std::erf(y / std::sqrt(2.0)));
    case Activation::gelu_tanh:
      return 0.5 * y * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (y + 0.044715 * y * y * y)));
    case Activation::silu:
      return y / (1.0 + std::exp(-y));
  }
  return y;
}

constexpr float kSentinel = 1234.5f;

// The reference for one element of C from its dot product (sum, and the sum of the terms'
// magnitudes), with the epilogue applied, and the tolerance that element is checked against.
struct Expected {
  double value, tolerance;
};
inline Expected expected_element(double sum, double mag, int64_t K, double scale, double bias,
                                 Activation act, bool has_residual, double residual,
                                 bool gate = false) {
  double y = scale * sum + bias;
  double m = std::fabs(scale) * mag + std::fabs(bias);
  y = apply_act(act, y);
  if (has_residual && gate) {
    y *= residual;
    m *= std::fabs(residual);
  } else if (has_residual) {
    y += residual;
    m += std::fabs(residual);
  }
  return {y, 1e-5 * (1.0 + m) + 1.3e-6 * double(std::max<int64_t>(1, K)) * std::fabs(y)};
}

// One problem: operands, C with padding filled by a sentinel, and the check against the reference.
class Case {
 public:
  // c_pad: elements between C's rows (and the residual's: c_pad + 2); 0 for a one-column C
  // stored as a contiguous column.
  // a_shift, b_shift: Operand's line_shift for A and B.
  Case(Shape s, Layout la, Layout lb, EpiKind e, uint32_t seed, int64_t c_pad = 3, int a_shift = -1,
       int b_shift = -1)
      : s_(s), e_(e), rng_(seed), a_(s.M, s.K, la, rng_, a_shift), b_(s.K, s.N, lb, rng_, b_shift) {
    ldc_ = s.N + c_pad;
    c_.assign(size_t(std::max<int64_t>(1, s.M * ldc_ + 8)), kSentinel);
    bias_.resize(size_t(s.N + 1));
    for (float& v : bias_) v = rng_.uniform();
    ldr_ = s.N + (c_pad ? c_pad + 2 : 0);
    res_.resize(size_t(s.M * ldr_ + 1));
    for (float& v : res_) v = rng_.uniform();
    if (e.col_scale) {  // (drawn only then: the other cases' operands stay as they were)
      cs_.resize(size_t(s.N + 1));
      for (float& v : cs_) v = rng_.uniform();
    }
  }

  MatrixRef b_ref() const { return b_.ref; }
  // One residual row added to every row of C (ld_residual 0: a broadcast residual).
  void broadcast_residual_row() { ldr_ = 0; }
  void fill_ramp_b(float lo, float hi) {
    for (int64_t i = 0; i < s_.M; ++i)
      for (int64_t k = 0; k < s_.K; ++k) a_.mut(i, k) = 1.0f;
    for (int64_t k = 0; k < s_.K; ++k)
      for (int64_t j = 0; j < s_.N; ++j)
        b_.mut(k, j) = lo + (hi - lo) * float(j) / float(std::max<int64_t>(1, s_.N - 1));
  }

  GemmProblem problem() {
    std::fill(c_.begin(), c_.end(), kSentinel);
    GemmProblem p;
    p.M = s_.M, p.N = s_.N, p.K = s_.K;
    p.a = a_.ref;
    p.b = b_.ref;
    p.c = c_.data() + 1;
    p.ldc = ldc_;
    p.epi.bias = e_.bias ? bias_.data() : nullptr;
    p.epi.scale = e_.scale ? 0.75f : 1.0f;
    p.epi.act = e_.act;
    p.epi.residual = e_.residual ? res_.data() : nullptr;
    p.epi.ld_residual = e_.residual ? ldr_ : 0;
    p.epi.residual_mul = e_.gate;
    p.epi.col_scale = e_.col_scale ? cs_.data() : nullptr;
    return p;
  }
  void run(ThreadPool& pool, Isa isa) { gemm(problem(), pool, isa); }
  void run_prepacked(ThreadPool& pool, const PackedB& packed) {
    gemm_prepacked(problem(), packed, pool);
  }

  // max over C of |got - ref| / tolerance (> 1 fails); infinity if anything outside C changed.
  double max_violation() const {
    double worst = 0;
    for (size_t idx = 0; idx < c_.size(); ++idx) {
      const int64_t off = int64_t(idx) - 1;
      // (With no columns and no padding ldc is 0: nothing is inside C.)
      const bool inside = off >= 0 && ldc_ > 0 && off / ldc_ < s_.M && off % ldc_ < s_.N;
      if (!inside && c_[idx] != kSentinel) return std::numeric_limits<double>::infinity();
    }
    for (int64_t i = 0; i < s_.M; ++i) {
      for (int64_t j = 0; j < s_.N; ++j) {
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < s_.K; ++k) {
          const double t = a_.at(i, k) * b_.at(k, j);
          sum += t;
          mag += std::fabs(t);
        }
        const Expected want = expected_element(
            sum, mag, s_.K, (e_.scale ? 0.75 : 1.0) * (e_.col_scale ? cs_[size_t(j)] : 1.0),
            e_.bias ? bias_[size_t(j)] : 0.0, e_.act, e_.residual,
            e_.residual ? res_[size_t(i * ldr_ + j)] : 0.0, e_.gate);
        const double got = c_[size_t(1 + i * ldc_ + j)];
        if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
        worst = std::max(worst, std::fabs(got - want.value) / want.tolerance);
      }
    }
    return worst;
  }
  // All of C's buffer (with the guard elements), for comparing runs bit for bit.
  const std::vector<float>& c_storage() const { return c_; }

 private:
  Shape s_;
  EpiKind e_;
  Rng rng_;
  Operand a_, b_;
  int64_t ldc_, ldr_;
  std::vector<float> c_, bias_, res_, cs_;
};

// `batch` problems sharing bias; A and/or B either batched (own matrix each) or broadcast.
class BatchedCase {
 public:
  BatchedCase(Shape s, int64_t batch, bool a_batched, bool b_batched, EpiKind e, uint32_t seed)
      : s_(s), batch_(batch), a_batched_(a_batched), b_batched_(b_batched), e_(e) {
    Rng rng(seed);
    a_.resize(size_t((a_batched ? batch : 1) * s.M * s.K));
    b_.resize(size_t((b_batched ? batch : 1) * s.K * s.N));
    c_.assign(size_t(batch * s.M * s.N), kSentinel);
    res_.resize(size_t(batch * s.M * s.N));
    bias_.resize(size_t(s.N));
    for (auto* v : {&a_, &b_, &res_, &bias_})
      for (float& x : *v) x = rng.uniform();
  }

  void run(ThreadPool& pool, Isa isa) {
    GemmProblem p;
    p.M = s_.M, p.N = s_.N, p.K = s_.K;
    p.a = MatrixRef{a_.data(), s_.K, 1};
    p.b = MatrixRef{b_.data(), s_.N, 1};
    p.c = c_.data();
    p.ldc = s_.N;
    p.epi.bias = e_.bias ? bias_.data() : nullptr;
    p.epi.act = e_.act;
    p.epi.residual = e_.residual ? res_.data() : nullptr;
    p.epi.ld_residual = s_.N;
    p.epi.residual_mul = e_.gate;
    p.epi.col_scale = e_.col_scale ? bias_.data() : nullptr;  // the bias's values, as a scale
    BatchStrides st{a_batched_ ? s_.M * s_.K : 0, b_batched_ ? s_.K * s_.N : 0, s_.M * s_.N,
                    s_.M * s_.N};
    gemm_batched(p, batch_, st, pool, isa);
  }

  double max_violation() const {
    double worst = 0;
    for (int64_t bt = 0; bt < batch_; ++bt) {
      const float* a = a_.data() + (a_batched_ ? bt * s_.M * s_.K : 0);
      const float* b = b_.data() + (b_batched_ ? bt * s_.K * s_.N : 0);
      for (int64_t i = 0; i < s_.M; ++i) {
        for (int64_t j = 0; j < s_.N; ++j) {
          double sum = 0, mag = 0;
          for (int64_t k = 0; k < s_.K; ++k) {
            sum += double(a[i * s_.K + k]) * b[k * s_.N + j];
            mag += std::fabs(double(a[i * s_.K + k]) * b[k * s_.N + j]);
          }
          const double cs = e_.col_scale ? bias_[size_t(j)] : 1.0;
          double y = apply_act(e_.act, cs * sum + (e_.bias ? bias_[size_t(j)] : 0.0));
          const size_t ci = size_t(bt * s_.M * s_.N + i * s_.N + j);
          if (e_.residual) y = e_.gate ? y * res_[ci] : y + res_[ci];
          mag += 2;
          const double got = c_[ci];
          if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
          const double tol = 1e-5 * (1.0 + mag) + 1.3e-6 * double(s_.K) * std::fabs(y);
          worst = std::max(worst, std::fabs(got - y) / tol);
        }
      }
    }
    return worst;
  }

 private:
  Shape s_;
  int64_t batch_;
  bool a_batched_, b_batched_;
  EpiKind e_;
  std::vector<float> a_, b_, c_, res_, bias_;
};

// The host's caches as the planner sees an Intel core's (neither a Zen nor split-256): for tests
// of rules that Zen cores take otherwise.
inline CacheSizes intel_caches() {
  CacheSizes c = host_cpu().caches;
  c.split_256 = false;
  c.amd_zen = false;
  return c;
}

// Runs `plan` for c's problem on pools of 1, 2 and 3 threads and on none (gemm_batched's way),
// C back to the sentinel each time, whatever threads the plan was made for: the worst
// max_violation() of the four runs.
inline double worst_on_every_pool(const GemmPlan& plan, Case& c) {
  static ThreadPool pool1(1), pool2(2), pool3(3);
  double worst = 0;
  for (ThreadPool* pool : {&pool1, &pool2, &pool3, static_cast<ThreadPool*>(nullptr)}) {
    plan.run_on(c.problem(), pool);
    worst = std::max(worst, c.max_violation());
  }
  return worst;
}

// A pool of two threads shared by a test binary's cases.
inline ThreadPool& pool2() {
  static ThreadPool pool(2);
  return pool;
}

// The path a plan's problem takes on `pool`, by the stats() counter that moved.
inline std::string path_taken(const GemmPlan& plan, Case& c, ThreadPool& pool) {
  const GemmStats before = stats();
  plan.run(c.problem(), pool);
  const GemmStats after = stats();
  if (after.dot_calls > before.dot_calls) return "dot";
  if (after.stream_calls > before.stream_calls) return "stream";
  if (after.direct_calls > before.direct_calls) return "direct";
  if (after.skinny_calls > before.skinny_calls) return "skinny";
  if (after.packed_calls > before.packed_calls) return "packed";
  return "none";
}

}  // namespace kiln::x86::testing
