// Randomized differential fuzzer for the x86 GEMM planner and driver (gemm_driver.cpp,
// blocking.cpp, k_split.cpp, stream_path.cpp, dot_path.cpp): draws problems whose shapes,
// strides, epilogues, thread counts and cache sizes sit on the path-selection rules' boundaries,
// runs every ISA of supported_isas() on pools of 1-3 threads and on none, and checks C against
// the double reference with x86_gemm_testing.h's tolerance, and the memory around C (and the
// inputs) against writes.
//
//   kiln_gemm_fuzz [--seconds=N] [--seed=S] [--verbose]   N: time budget (60), S: the draw seed
//                                                         (from the clock, printed, if absent)
//   kiln_gemm_fuzz --repro='M=.. N=.. ...'                one case, from a failure's repro line
//
//   kiln_gemm_fuzz --selftest                             the check catches planted errors
//
// Each failure prints one line with every parameter (a --repro argument); the exit status is 1
// when anything failed. Cases that take over 5 s are printed as hang suspects (a watchdog prints
// them while they run, and aborts after --hang=S seconds, 300 by default). A fault inside
// GemmPlan::make is reported as a failure and the run goes on; a fault while a plan runs prints
// the case's repro line and ends the process. The summary counts, per ISA, the plans' paths and
// features (read from GemmPlan::Impl) and, per recipe of the draw, the paths it reached.
//
// Problems in the header's layouts (testing::Layout) and within kCaseVolume run through
// testing::Case and testing::worst_on_every_pool as they are; the others (custom strides, C's
// row stride, a scale other than 0.75, a prepacked B, larger shapes) through FuzzCase below,
// which builds its operands with testing::Operand (custom strides in place of the named
// layouts), mirrors Case's C buffer (sentinel-filled, checked outside C) and tolerance, and
// computes the reference once per problem instead of once per run. FuzzCase's GEMM reads copies
// of A, B, the bias and the residual placed against an inaccessible page (reads past them fault),
// checks that they are unchanged, and maps operands of huge strides sparsely (the displacement
// limits of the generated code).
#include "x86_gemm_testing.h"

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/kernel_registry.h"
#include "jit/thread_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

// The plan's internals (path, blocking, kernels) for the coverage counts and failure reports:
// GemmPlan::impl_ is private, and an explicit instantiation may name it.
namespace {
using ImplMember = std::unique_ptr<GemmPlan::Impl> GemmPlan::*;
ImplMember impl_member();
template <ImplMember M>
struct ImplAccess {
  friend ImplMember impl_member() { return M; }
};
template struct ImplAccess<&GemmPlan::impl_>;
const GemmPlan::Impl& impl_of(const GemmPlan& plan) { return *(plan.*impl_member()); }
}  // namespace

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ----------------------------------------------------------------------------------------------
// Parameters of one case (everything the repro line carries).

constexpr int kCustom = 7;  // OpSpec::kind: custom strides (0-6: testing::Layout)

struct OpSpec {
  int kind = 0;
  int64_t rs = 0, cs = 0;
};

const char* const kActNames[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};

struct CacheChoice {
  const char* name;
  CacheSizes caches;
};
std::vector<CacheChoice>& cache_choices() {
  static std::vector<CacheChoice> v = {
      {"host", host_cpu().caches},
      {"zen3", CacheSizes{512 << 10, 8, 4096}},
      {"zen5", CacheSizes{1 << 20, 12, 4096}},
      {"xeon", CacheSizes{2 << 20, 12, 4096}},
      {"l2_256k", CacheSizes{256 << 10, 8, 4096}},
      // A Zen 3 as the planner sees it (amd_zen: the Zen cores' rules; "zen3" above predates them).
      {"zen3_rules", CacheSizes{512 << 10, 8, 4096, false, 32 << 20, true}},
  };
  return v;
}
int cache_index(const std::string& name) {
  for (size_t c = 0; c < cache_choices().size(); ++c)
    if (cache_choices()[c].name == name) return int(c);
  return 0;
}

struct Params {
  int64_t M = 1, N = 1, K = 1;
  OpSpec a, b;
  int64_t c_pad = 3;  // ldc = N + c_pad
  int64_t r_pad = 5;  // ld_residual = N + r_pad; -1: one row broadcast (ld_residual 0)
  int act = 0;
  bool bias = false, residual = false;
  bool gate = false;       // the residual multiplies
  bool col_scale = false;  // a column scale (the bias's values: both guarded the same way)
  float scale = 1.0f;      // 1: none
  bool prepacked = false;
  int threads = 2;  // the plan's
  int caches = 0;   // cache_choices()
  bool dyn_m = false, dyn_nk = false;
  bool api = false;  // also through gemm() / gemm_prepacked() on a 2-thread pool
  uint32_t data_seed = 1;
  std::string isa;     // repro only: one ISA ("" all)
  std::string recipe;  // how it was drawn (information only)
};

std::string op_name(const OpSpec& o) {
  if (o.kind < kCustom) return layout_name(Layout(o.kind));
  return "s" + std::to_string(o.rs) + "," + std::to_string(o.cs);
}

bool parse_op(const std::string& s, OpSpec& o) {
  for (int k = 0; k < kCustom; ++k)
    if (s == layout_name(Layout(k))) {
      o = OpSpec{k, 0, 0};
      return true;
    }
  if (s.size() > 1 && s[0] == 's') {
    const size_t comma = s.find(',');
    if (comma == std::string::npos) return false;
    o.kind = kCustom;
    o.rs = std::stoll(s.substr(1, comma - 1));
    o.cs = std::stoll(s.substr(comma + 1));
    return true;
  }
  return false;
}

std::string repro_string(const Params& P, const char* isa = nullptr) {
  std::ostringstream o;
  o << "M=" << P.M << " N=" << P.N << " K=" << P.K << " A=" << op_name(P.a) << " B=" << op_name(P.b)
    << " c_pad=" << P.c_pad << " r_pad=" << P.r_pad << " act=" << kActNames[P.act]
    << " bias=" << P.bias << " scale=" << P.scale << " res=" << P.residual << " gate=" << P.gate
    << " cscale=" << P.col_scale << " prepacked=" << P.prepacked << " threads=" << P.threads
    << " caches=" << cache_choices()[size_t(P.caches)].name << " dyn_m=" << P.dyn_m
    << " dyn_nk=" << P.dyn_nk << " api=" << P.api << " seed=" << P.data_seed;
  if (isa) o << " isa=" << isa;
  return o.str();
}

bool parse_repro(const std::string& line, Params& P) {
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const size_t eq = tok.find('=');
    if (eq == std::string::npos) return false;
    const std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    if (k == "M")
      P.M = std::stoll(v);
    else if (k == "N")
      P.N = std::stoll(v);
    else if (k == "K")
      P.K = std::stoll(v);
    else if (k == "A") {
      if (!parse_op(v, P.a)) return false;
    } else if (k == "B") {
      if (!parse_op(v, P.b)) return false;
    } else if (k == "c_pad")
      P.c_pad = std::stoll(v);
    else if (k == "r_pad")
      P.r_pad = std::stoll(v);
    else if (k == "act") {
      bool found = false;
      for (int a = 0; a < 5; ++a)
        if (v == kActNames[a]) P.act = a, found = true;
      if (!found) return false;
    } else if (k == "bias")
      P.bias = v == "1";
    else if (k == "scale")
      P.scale = std::stof(v);
    else if (k == "res")
      P.residual = v == "1";
    else if (k == "gate")
      P.gate = v == "1";
    else if (k == "cscale")
      P.col_scale = v == "1";
    else if (k == "prepacked")
      P.prepacked = v == "1";
    else if (k == "threads")
      P.threads = std::stoi(v);
    else if (k == "caches") {
      bool found = false;
      for (size_t c = 0; c < cache_choices().size(); ++c)
        if (v == cache_choices()[c].name) P.caches = int(c), found = true;
      if (!found) return false;
    } else if (k == "dyn_m")
      P.dyn_m = v == "1";
    else if (k == "dyn_nk")
      P.dyn_nk = v == "1";
    else if (k == "api")
      P.api = v == "1";
    else if (k == "seed")
      P.data_seed = uint32_t(std::stoul(v));
    else if (k == "isa")
      P.isa = v;
    else
      return false;
  }
  return true;
}

// ----------------------------------------------------------------------------------------------
// Operands and the check.

// An operand of the header's layouts, or with custom strides (any sign, rows may overlap) over a
// buffer that spans exactly its elements, from an unaligned start.
Operand make_operand(int64_t rows, int64_t cols, const OpSpec& o, Rng& rng) {
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
std::pair<int64_t, int64_t> span_of(const MatrixRef& r, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return {0, -1};
  return {std::min<int64_t>(0, r.row_stride * (rows - 1)) +
              std::min<int64_t>(0, r.col_stride * (cols - 1)),
          std::max<int64_t>(0, r.row_stride * (rows - 1)) +
              std::max<int64_t>(0, r.col_stride * (cols - 1))};
}

// Operands spanning more elements than this (custom strides only) are sparse: their buffer is
// mapped, not filled, and only their elements are written (see the huge_stride recipe).
constexpr double kDenseMaxElems = 2.4e7;
double span_elems(int64_t rows, int64_t cols, const OpSpec& o) {
  if (o.kind < kCustom) return double(rows) * double(cols + 8) + double(cols) * 8;
  return double(std::llabs(o.rs)) * double(std::max<int64_t>(0, rows - 1)) +
         double(std::llabs(o.cs)) * double(std::max<int64_t>(0, cols - 1)) + 1;
}
bool is_sparse(int64_t rows, int64_t cols, const OpSpec& o) {
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
bool header_case_fits(const Params& P) {
  const bool c_ok = P.c_pad >= 0;
  const bool r_ok = !P.residual || P.r_pad == -1 || P.r_pad == (P.c_pad ? P.c_pad + 2 : 0);
  return P.a.kind < kCustom && P.b.kind < kCustom && c_ok && r_ok &&
         (P.scale == 1.0f || P.scale == 0.75f) && !P.prepacked && P.M * P.N * P.K <= kCaseVolume &&
         !(P.M == 0 && Layout(P.a.kind) == Layout::reversed_rows);
}

// ----------------------------------------------------------------------------------------------
// Plan description (coverage and reports).

const char* path_name(Path p) {
  switch (p) {
    case Path::empty:
      return "empty";
    case Path::direct:
      return "direct";
    case Path::direct_rows:
      return "direct_rows";
    case Path::direct_k:
      return "direct_k";
    case Path::skinny:
      return "skinny";
    case Path::stream:
      return "stream";
    case Path::dot:
      return "dot";
    case Path::packed:
      return "packed";
    case Path::edge_split:
      return "edge_split";
    case Path::transposed:
      return "transposed";
  }
  return "?";
}

// The path, and the features of the plan that the rules switch on.
struct PlanInfo {
  std::string path;               // e.g. "packed", "stream(column_as_row)"
  std::vector<std::string> tags;  // features, for the coverage counts
  std::string detail;             // for reports
};

PlanInfo describe(const GemmPlan& plan) {
  const GemmPlan::Impl& s = impl_of(plan);
  PlanInfo info;
  info.path = path_name(s.path);
  std::ostringstream d;
  auto tag = [&](const std::string& t) { info.tags.push_back(info.path + ":" + t); };
  bool any_cap = false, any_pf = false, any_cols_outer = false;
  for (const Kernel* k : s.used) {
    any_cap |= k->desc.rows_cap != 0;
    any_pf |= k->desc.b_prefetch != 0;
    any_cols_outer |= k->desc.cols_outer != 0;
  }
  if (any_cap) tag("rows_cap");
  if (any_pf) tag("b_prefetch");
  if (any_cols_outer) tag("cols_outer");
  switch (s.path) {
    case Path::empty:
      break;
    case Path::direct:
      if (s.copy_b) tag("copy_b");
      break;
    case Path::direct_rows:
      tag(s.nchunks > 1 ? "chunks>1" : "one_chunk");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks;
      break;
    case Path::direct_k:
      tag(s.blk.tk > 1 ? "tk>1" : "tk=1");
      if (s.last_kb != s.blk.KC) tag("last_kb_longer");
      d << " tk=" << s.blk.tk << " npc=" << s.blk.npc << " KC=" << s.blk.KC
        << " last_kb=" << s.last_kb;
      break;
    case Path::skinny:
      tag(s.nchunks > 1 ? "chunks>1" : "one_chunk");
      tag(s.nkb == 1 ? "one_kblock" : s.nkb == 2 ? "two_kblocks" : "kblocks>2");
      if (s.nkb > 1 && s.kb <= 32) tag("page_apart_kblocks");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks << " kb=" << s.kb << " nkb=" << s.nkb;
      break;
    case Path::stream:
      if (s.column_as_row) tag("column_as_row");
      if (s.M > 1 && !s.column_as_row) tag("rows");
      tag(s.blk.tk > 1 ? "k_split" : "n_split");
      if (s.nchunks > 1) tag("chunks>1");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks << " tk=" << s.blk.tk;
      break;
    case Path::dot:
      tag(s.dot_over == DotOver::a_rows ? "a_rows" : "b_rows");
      tag("vecs=" + std::to_string(s.dot_vecs));
      if (s.dot_rest[1]) tag("rest_vecs=" + std::to_string(s.dot_rest[1]->desc.rows));
      if (s.nchunks > 1) tag("chunks>1");
      if (s.dot[0]) tag("blocks>1");
      if (s.dot[1]->desc.k_align) tag("k_align");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks << " dot_block=" << s.dot_block;
      break;
    case Path::edge_split:
      tag(impl_of(*s.split_edge).dot[0] ? "edge_blocks>1" : "edge_one_block");
      break;
    case Path::transposed:
      tag(std::string("of_") + path_name(impl_of(*s.transposed_plan).path));
      tag(s.transposed_epilogue ? "epilogue" : "no_epilogue");
      tag("cols=" + std::to_string(s.N));
      break;
    case Path::packed: {
      const PackedBlocking& b = s.blk;
      tag(std::string("kc_rule=") + kc_rule_name(b.kc_rule));
      if (b.tk > 1) tag("k_split");
      if (b.rows_outer) tag("rows_outer");
      if (b.a_once)
        tag("a_once");
      else
        tag("mc_blocks>1");
      if (b.tm > 1) tag("split_m");
      if (b.tn > 1) tag("split_n");
      tag(b.npc == 1 ? "one_kblock" : b.npc == 2 ? "two_kblocks" : "kblocks>2");
      if (s.M % b.MR) tag("m_edge");
      if (s.N % b.NR) tag("n_edge");
      d << " MR=" << b.MR << " NR=" << b.NR << " tm=" << b.tm << " tn=" << b.tn << " tk=" << b.tk
        << " KC=" << b.KC << " npc=" << b.npc << " MC=" << b.MC << " NCP=" << b.NCP
        << " a_once=" << b.a_once << " rows_outer=" << b.rows_outer
        << " kc_rule=" << kc_rule_name(b.kc_rule);
      break;
    }
  }
  std::ostringstream full;
  full << "path=" << info.path << (s.column_as_row ? "(column_as_row)" : "") << d.str()
       << " kernels=";
  for (size_t i = 0; i < s.used.size(); ++i) full << (i ? "," : "") << s.used[i]->info.name;
  info.detail = full.str();
  return info;
}

// ----------------------------------------------------------------------------------------------
// Watchdog and crash reports: the running case's repro line.

std::mutex g_cur_mu;
std::string g_cur_repro;
char g_cur_buf[1024];
std::atomic<int64_t> g_case_start_ns{0};
std::atomic<int64_t> g_case_id{0};
double g_hang_abort_s = 300;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

void set_current(const std::string& s) {
  std::lock_guard<std::mutex> lock(g_cur_mu);
  g_cur_repro = s;
  const size_t n = std::min(s.size(), sizeof(g_cur_buf) - 2);
  std::memcpy(g_cur_buf, s.data(), n);
  g_cur_buf[n] = '\n';
  g_cur_buf[n + 1] = 0;
}

// A fault inside GemmPlan::make on the main thread (the planner's own arithmetic, before any
// kernel runs) is reported as a failure and the fuzzing goes on; anywhere else it ends the process.
sigjmp_buf g_make_jmp;
volatile sig_atomic_t g_in_make = 0;

// GemmPlan::make(...) into g_made; 0, or the signal it faulted with (g_made then empty). Only
// globals change between the sigsetjmp and a siglongjmp back to it.
std::shared_ptr<const GemmPlan> g_made;
[[gnu::noinline]] int make_guarded(const GemmProblem& p, Isa isa, int threads, bool prepacked,
                                   const CacheSizes& caches) {
  g_made.reset();
  if (const int sig = sigsetjmp(g_make_jmp, 1); sig != 0) return sig;
  g_in_make = 1;
  g_made = GemmPlan::make(p, isa, threads, prepacked, caches);
  g_in_make = 0;
  return 0;
}

void on_fatal_signal(int sig) {
  if (g_in_make) {
    g_in_make = 0;
    siglongjmp(g_make_jmp, sig);
  }
  const char head[] = "\nFATAL SIGNAL while running: --repro='";
  ssize_t ignored = write(2, head, sizeof(head) - 1);
  ignored = write(2, g_cur_buf, strnlen(g_cur_buf, sizeof(g_cur_buf)));
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void watchdog() {
  int64_t warned = -1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int64_t start = g_case_start_ns.load(), id = g_case_id.load();
    if (start == 0) continue;
    const double s = double(now_ns() - start) * 1e-9;
    if (s > 5 && warned != id) {
      warned = id;
      std::lock_guard<std::mutex> lock(g_cur_mu);
      std::fprintf(stderr, "HANG? case %lld running %.1f s: --repro='%s'\n", (long long)id, s,
                   g_cur_repro.c_str());
    }
    if (s > g_hang_abort_s) {
      std::lock_guard<std::mutex> lock(g_cur_mu);
      std::fprintf(stderr, "HANG: case running %.0f s, aborting: --repro='%s'\n", s,
                   g_cur_repro.c_str());
      std::fflush(stderr);
      std::_Exit(3);
    }
  }
}

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

const std::vector<int64_t> kTiles = {13, 14, 15, 27, 28, 29, 31, 32, 33, 63, 64, 65, 5,
                                     6,  7,  8,  9,  12, 16, 17, 47, 48, 49, 95, 96, 97};
// Rows: dot (8), page-apart skinny and direct_k few rows (12), skinny (16, 32), few_rows (24, 60,
// 66 on AVX2 tiles), MR multiples (14, 28, 42, 6, 12), wide_and_tall (1000), 16 row tiles a
// thread (split M: 16 * 14 * T, 16 * 6 * T).
const std::vector<int64_t> kRowMarks = {
    1,   2,   3,   4,   7,   8,   9,   11,  12,  13,  14,  15,  16,  17,  23,   24,  25,
    31,  32,  33,  41,  42,  43,  59,  60,  61,  65,  66,  67,  95,  96,  97,   191, 192,
    193, 223, 224, 225, 447, 448, 449, 511, 512, 513, 671, 672, 673, 999, 1000, 1001};
// Columns: dot a_rows (4), tiles (16, 32, 48, 64), direct_k (100, 128, 256), wide_and_tall
// (128), stream (256, 4096), B rows a page apart (1024).
const std::vector<int64_t> kColMarks = {1,   2,   3,    4,    5,    15,   16,   17,   31,
                                        32,  33,  47,   48,   49,   63,   64,   65,   99,
                                        100, 101, 127,  128,  129,  255,  256,  257,  511,
                                        512, 513, 1016, 1017, 1023, 1024, 1025, 2047, 2048};
const std::vector<int64_t> kKMarks = {1,   2,   15,   16,   17,   31,   32,   33,   63,   64,
                                      65,  127, 128,  129,  255,  256,  257,  299,  300,  301,
                                      383, 384, 385,  511,  512,  513,  599,  600,  601,  899,
                                      900, 901, 1023, 1024, 1025, 1200, 1536, 2047, 2048, 2049};

int64_t near(Draw& d, int64_t v) { return std::max<int64_t>(0, v + d.range(-2, 2)); }

int64_t dim_any(Draw& d, const std::vector<int64_t>& marks) {
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

OpSpec layout_any(Draw& d) { return OpSpec{int(d.pick({0, 0, 1, 1, 2, 3, 4, 4, 5, 5, 6})), 0, 0}; }
OpSpec unit_cols(Draw& d) {  // column stride 1
  return OpSpec{int(d.pick({0, 0, 0, 4, 5})), 0, 0};
}
OpSpec unit_rows(Draw& d) {  // row stride 1 (transposed)
  return OpSpec{int(d.pick({1, 1, 6})), 0, 0};
}
// Rows 4 KiB, 8 KiB or 2 KiB apart (or a line more), forward or reversed; columns unit-stride.
OpSpec page_rows(Draw& d, int64_t cols) {
  int64_t rs = d.pick<int64_t>({1024, 1024, 2048, 2048, 512, 1040, 1025, 4096});
  if (rs < cols && d.chance(0.7)) rs = (cols + 1023) / 1024 * 1024;  // no overlap, mostly
  if (d.chance(0.25)) rs = -rs;
  return OpSpec{kCustom, rs, 1};
}
// Columns 4 KiB / 8 KiB apart, rows unit-stride (a transposed view of page-apart rows).
OpSpec page_cols(Draw& d, int64_t rows) {
  int64_t cs = d.pick<int64_t>({1024, 2048, 1040});
  if (cs < rows) cs = (rows + 1023) / 1024 * 1024;
  return OpSpec{kCustom, 1, cs};
}
OpSpec weird(Draw& d, int64_t rows, int64_t cols) {
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
void bound(Params& P, Draw& d) {
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
Params draw(Draw& d) {
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

// ----------------------------------------------------------------------------------------------
// Running one case.

struct Totals {
  std::map<std::string, int64_t> cases_per_isa;
  std::map<std::string, int64_t> runs_per_isa;
  std::map<std::string, std::map<std::string, int64_t>> paths;    // isa -> path -> count
  std::map<std::string, std::map<std::string, int64_t>> tags;     // isa -> tag -> count
  std::map<std::string, std::map<std::string, int64_t>> recipes;  // recipe -> isa:path -> count
  int64_t failures = 0, slow = 0, header_cases = 0, fuzz_cases = 0;
  std::vector<std::string> failure_lines;
};

kiln::ThreadPool* pools[3] = {nullptr, nullptr, nullptr};
const char* const kPoolNames[] = {"pool1", "pool2", "pool3", "no_pool", "gemm_api"};

// Runs P on every ISA (or the one it names); returns whether all passed.
bool run_case(const Params& P, Totals& T, bool verbose) {
  bool ok = true;
  const bool header = header_case_fits(P);
  std::unique_ptr<Case> hc;
  std::unique_ptr<FuzzCase> fc;
  auto setup_repro = repro_string(P);
  set_current(setup_repro + "   [building operands]");
  if (header) {
    EpiKind e{Activation(P.act), P.bias, P.scale != 1.0f, P.residual, P.gate, P.col_scale};
    hc = std::make_unique<Case>(Shape{P.M, P.N, P.K}, Layout(P.a.kind), Layout(P.b.kind), e,
                                P.data_seed, P.c_pad);
    if (P.residual && P.r_pad == -1) hc->broadcast_residual_row();
    ++T.header_cases;
  } else {
    fc = std::make_unique<FuzzCase>(P);
    set_current(setup_repro + "   [reference]");
    fc->compute_reference();
    ++T.fuzz_cases;
  }
  for (Isa isa : supported_isas()) {
    if (!P.isa.empty() && P.isa != isa_name(isa)) continue;
    const std::string repro = repro_string(P, isa_name(isa));
    set_current(repro);
    const auto t0 = Clock::now();
    std::vector<std::string> bad;  // failing runs
    std::string plan_detail = "(no plan)";
    try {
      GemmProblem p = header ? hc->problem() : fc->problem();
      p.dynamic_m = P.dyn_m;
      p.dynamic_nk = P.dyn_nk;
      std::shared_ptr<const PackedB> packed;
      if (P.prepacked) packed = pack_b(p.b, P.K, P.N, isa);
      const int sig =
          make_guarded(p, isa, P.threads, P.prepacked, cache_choices()[size_t(P.caches)].caches);
      if (sig != 0) {
        bad.push_back(std::string("signal ") + strsignal(sig) + " in GemmPlan::make");
        throw std::runtime_error("GemmPlan::make faulted");
      }
      const std::shared_ptr<const GemmPlan> plan = std::move(g_made);
      PlanInfo info = describe(*plan);
      if (P.prepacked) info.tags.push_back(info.path + ":prepacked_b");
      if (P.dyn_m) info.tags.push_back(info.path + ":dynamic_m");
      if (P.dyn_nk) info.tags.push_back(info.path + ":dynamic_nk");
      if (P.threads > 3) info.tags.push_back(info.path + ":plan_threads>3");
      plan_detail = info.detail;
      ++T.cases_per_isa[isa_name(isa)];
      ++T.paths[isa_name(isa)][info.path];
      for (const std::string& t : info.tags) ++T.tags[isa_name(isa)][t];
      ++T.recipes[P.recipe][std::string(isa_name(isa)) + ":" + info.path];
      if (verbose) std::printf("  %s: %s\n", isa_name(isa), plan_detail.c_str());
      if (header && !P.prepacked) {
        // The header's check as it is: every pool, the worst of the four runs.
        const double w = worst_on_every_pool(*plan, *hc);
        T.runs_per_isa[isa_name(isa)] += 4;
        if (!(w <= 1.0)) {
          std::ostringstream o;
          o << "worst_on_every_pool " << w;
          // Which pool: rerun one by one.
          for (int i = 0; i < 4; ++i) {
            plan->run_on(hc->problem(), i < 3 ? pools[i] : nullptr);
            const double v = hc->max_violation();
            if (!(v <= 1.0)) o << "; " << kPoolNames[i] << " " << v;
          }
          bad.push_back(o.str());
        }
        if (P.api) {
          hc->run(*pools[1], isa);
          ++T.runs_per_isa[isa_name(isa)];
          const double v = hc->max_violation();
          if (!(v <= 1.0)) {
            std::ostringstream o;
            o << kPoolNames[4] << " " << v;
            bad.push_back(o.str());
          }
        }
      } else {
        for (int i = 0; i < 5; ++i) {
          if (i == 4 && !P.api) break;
          GemmProblem q = fc->problem();
          if (P.prepacked) q.b.data = nullptr;  // ignored with a PackedB
          if (i < 4) {
            q.dynamic_m = P.dyn_m;
            q.dynamic_nk = P.dyn_nk;
            plan->run_on(q, i < 3 ? pools[i] : nullptr, packed.get());
          } else if (P.prepacked) {
            gemm_prepacked(q, *packed, *pools[1]);
          } else {
            gemm(q, *pools[1], isa);
          }
          ++T.runs_per_isa[isa_name(isa)];
          const Violation v = fc->check();
          if (!(v.worst <= 1.0)) {
            std::ostringstream o;
            o << kPoolNames[i] << " " << v.worst << " (" << v.what << ")";
            bad.push_back(o.str());
          }
        }
      }
    } catch (const std::exception& e) {
      if (bad.empty() || std::string(e.what()) != "GemmPlan::make faulted")
        bad.push_back(std::string("exception: ") + e.what());
    }
    const double secs = seconds_since(t0);
    if (secs > 5) {
      ++T.slow;
      std::printf("SLOW %.1f s (hang suspect): --repro='%s' %s\n", secs, repro.c_str(),
                  plan_detail.c_str());
    }
    if (!bad.empty()) {
      ok = false;
      ++T.failures;
      std::ostringstream o;
      o << "FAIL [" << P.recipe << "] --repro='" << repro << "' | " << plan_detail << " |";
      for (const std::string& b : bad) o << " " << b << ";";
      std::printf("%s\n", o.str().c_str());
      std::fflush(stdout);
      if (T.failure_lines.size() < 200) T.failure_lines.push_back(o.str());
    }
  }
  return ok;
}

int64_t rss_mb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return int64_t(resident) * sysconf(_SC_PAGESIZE) / (1 << 20);
}

void print_summary(const Totals& T, double secs) {
  std::printf(
      "\n==== summary: %.0f s, %lld failures, %lld slow, %lld cases via testing::Case, "
      "%lld via FuzzCase; kernels generated %lld, RSS %lld MB\n",
      secs, (long long)T.failures, (long long)T.slow, (long long)T.header_cases,
      (long long)T.fuzz_cases, (long long)stats().kernels_generated, (long long)rss_mb());
  for (const auto& [isa, n] : T.cases_per_isa) {
    std::printf("%s: %lld cases, %lld runs\n", isa.c_str(), (long long)n,
                (long long)T.runs_per_isa.at(isa));
    std::printf("  paths:");
    for (const auto& [p, c] : T.paths.at(isa)) std::printf(" %s=%lld", p.c_str(), (long long)c);
    std::printf("\n  features:\n");
    for (const auto& [t, c] : T.tags.at(isa))
      std::printf("    %-32s %lld\n", t.c_str(), (long long)c);
  }
  std::printf("recipes (the draw's targets) -> paths taken:\n");
  for (const auto& [r, m] : T.recipes) {
    std::printf("  %-14s", r.c_str());
    for (const auto& [p, c] : m) std::printf(" %s=%lld", p.c_str(), (long long)c);
    std::printf("\n");
  }
  if (!T.failure_lines.empty()) {
    std::printf("\nfailures:\n");
    for (const std::string& l : T.failure_lines) std::printf("%s\n", l.c_str());
  }
  std::fflush(stdout);
}

// The check itself: runs that are right pass; a wrong element of C, a write just past a row of
// C (in its padding), before C or after it, and a modified input each fail.
int selftest() {
  int bad = 0;
  auto expect = [&](bool cond, const char* what) {
    std::printf("selftest: %-48s %s\n", what, cond ? "ok" : "NOT DETECTED / WRONG");
    bad += !cond;
  };
  for (Isa isa : supported_isas()) {
    // testing::Case (the header's check).
    {
      Case c({9, 21, 33}, Layout::padded, Layout::transposed,
             EpiKind{Activation::gelu, true, true, true}, 5, 3);
      auto plan = GemmPlan::make(c.problem(), isa, 2);
      expect(worst_on_every_pool(*plan, c) <= 1.0, "Case: a right run passes");
      auto& buf = const_cast<std::vector<float>&>(c.c_storage());
      const int64_t ldc = 21 + 3;
      plan->run_on(c.problem(), nullptr);
      buf[size_t(1 + 4 * ldc + 7)] += 1e-3f;
      expect(!(c.max_violation() <= 1.0), "Case: a wrong element fails");
      plan->run_on(c.problem(), nullptr);
      buf[size_t(1 + 4 * ldc + 21)] = 0;
      expect(!(c.max_violation() <= 1.0), "Case: a write in a row's padding fails");
    }
    // FuzzCase.
    Params P;
    P.M = 37, P.N = 45, P.K = 70, P.a = OpSpec{kCustom, 1024, 1}, P.b = OpSpec{kCustom, -50, 1};
    P.c_pad = 2, P.r_pad = -1, P.act = 4, P.bias = true, P.residual = true, P.scale = -1.5f;
    FuzzCase fc(P);
    fc.compute_reference();
    auto plan = GemmPlan::make(fc.problem(), isa, 2);
    auto run = [&] { plan->run_on(fc.problem(), pools[1]); };
    run();
    expect(fc.check().worst <= 1.0, "FuzzCase: a right run passes");
    const int64_t ldc = P.N + P.c_pad, off = fc.c_offset();
    struct Poke {
      int64_t at;
      const char* what;
    };
    for (Poke k : {Poke{off + 36 * ldc + 44, "FuzzCase: a wrong last element fails"},
                   Poke{off + 3 * ldc + P.N, "FuzzCase: a write in a row's padding fails"},
                   Poke{off - 1, "FuzzCase: a write before C fails"},
                   Poke{off + 36 * ldc + P.N, "FuzzCase: a write after C fails"}}) {
      run();
      fc.c_buffer()[size_t(k.at)] += 1e-3f;
      expect(!(fc.check().worst <= 1.0), k.what);
    }
    run();
    const_cast<float*>(fc.b_ref().data)[0] += 1.0f;
    expect(!(fc.check().worst <= 1.0), "FuzzCase: a modified input fails");
    const_cast<float*>(fc.b_ref().data)[0] -= 1.0f;
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("KILN_CACHE", "off", 0);  // kernels generated here, never from or to the disk cache
  double seconds = 60;
  uint64_t seed =
      uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) % 1000000007;
  bool verbose = false, selftest_only = false;
  std::string repro;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--seconds=", 0) == 0)
      seconds = std::stod(a.substr(10));
    else if (a.rfind("--seed=", 0) == 0)
      seed = std::stoull(a.substr(7));
    else if (a.rfind("--repro=", 0) == 0)
      repro = a.substr(8);
    else if (a.rfind("--hang=", 0) == 0)
      g_hang_abort_s = std::stod(a.substr(7));
    else if (a == "--verbose" || a == "-v")
      verbose = true;
    else if (a == "--selftest")
      selftest_only = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--seconds=N] [--seed=S] [--verbose] [--hang=S] | --repro='M=.. "
                   "N=.. ...' | --selftest\n",
                   argv[0]);
      return 2;
    }
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, on_fatal_signal);
  static kiln::ThreadPool pool1(1), pool2(2), pool3(3);
  pools[0] = &pool1, pools[1] = &pool2, pools[2] = &pool3;
  std::thread(watchdog).detach();

  const CacheSizes& hc = host_cpu().caches;
  std::printf("kiln_gemm_fuzz: isas");
  for (Isa isa : supported_isas()) std::printf(" %s", isa_name(isa));
  std::printf("; host caches l2=%lld l1d_ways=%lld l1d_way_bytes=%lld\n", (long long)hc.l2_bytes,
              (long long)hc.l1d_ways, (long long)hc.l1d_way_bytes);

  if (selftest_only) return selftest();
  Totals T;
  const auto start = Clock::now();
  if (!repro.empty()) {
    Params P;
    if (!parse_repro(repro, P)) {
      std::fprintf(stderr, "cannot parse --repro='%s'\n", repro.c_str());
      return 2;
    }
    P.recipe = "repro";
    std::printf("repro: %s (%s)\n", repro_string(P).c_str(),
                header_case_fits(P) ? "testing::Case" : "FuzzCase");
    const bool ok = run_case(P, T, true);
    std::printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }

  std::printf("seed %llu, %.0f s\n", (unsigned long long)seed, seconds);
  std::fflush(stdout);
  Draw d(seed);
  double last_progress = 0;
  int64_t n = 0;
  while (seconds_since(start) < seconds) {
    const Params P = draw(d);
    g_case_id.store(n);
    g_case_start_ns.store(now_ns());
    const auto t0 = Clock::now();
    run_case(P, T, verbose);
    const double secs = seconds_since(t0);
    g_case_start_ns.store(0);
    if (verbose)
      std::printf("case %lld [%s] %.3f s: %s\n", (long long)n, P.recipe.c_str(), secs,
                  repro_string(P).c_str());
    ++n;
    if (seconds_since(start) - last_progress > 30) {
      last_progress = seconds_since(start);
      std::printf("... %.0f s: %lld cases, %lld failures, %lld kernels, RSS %lld MB\n",
                  last_progress, (long long)n, (long long)T.failures,
                  (long long)stats().kernels_generated, (long long)rss_mb());
      std::fflush(stdout);
    }
  }
  print_summary(T, seconds_since(start));
  return T.failures ? 1 : 0;
}
