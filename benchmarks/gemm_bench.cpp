// kiln's x86 GEMM against oneDNN (dnnl_sgemm), OpenBLAS (cblas_sgemm) and LIBXSMM
// (libxsmm_smmdispatch, 1 thread, small shapes), and against the FMA peak and STREAM triad
// measured in this run. Per shape the contenders run in paired rounds (paired.h): every ratio is
// the median over rounds of ratios taken within a fraction of a second, with its quartiles.
//   ninja -C build-bench gemm_bench && build-bench/benchmarks/gemm_bench [--rounds=15]
//       [--burst=0.05] [--filter=512] [--threads=2] [--more] [--shapes=MxNxK[a|t|at],...]
//       [--align=64]
#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"
#include "limits.h"
#include "paired.h"

#include <kiln/kiln.h>

#include <cblas.h>
#include <dlfcn.h>
#include <libxsmm.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <strings.h>
#include <dnnl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

namespace {

namespace x86 = kiln::x86;
namespace bench = kiln::bench;
int kThreads = 2;  // --threads=N
constexpr double kOpenblasSpinSeconds = 0.15;
// kiln's pool threads poll for up to 1 ms after a job (jit/thread_pool.cpp): a burst on the
// 2-thread pool is followed by this much sleep, so that they do not take the next contender's
// cores.
constexpr double kKilnPoolSettleSeconds = 0.002;

struct Shape {
  std::string name;
  int64_t M, N, K;
  bool small;        // compared with LIBXSMM on 1 thread
  bool a_t = false;  // A stored transposed ([K, M] row-major: x.T @ w)
  bool b_t = false;  // B stored transposed ([N, K] row-major: x @ w.T, a linear layer's weight)
};

const std::vector<Shape> kShapes = {{"2048^3", 2048, 2048, 2048, false},
                                    {"512^3", 512, 512, 512, false},
                                    {"128x4096x1024", 128, 4096, 1024, false},
                                    {"64^3", 64, 64, 64, true},
                                    {"16^3", 16, 16, 16, true},
                                    {"23x57x91", 23, 57, 91, true},
                                    {"1x4096x4096", 1, 4096, 4096, false}};

// --more: shapes outside the list where a blocking, path or thread pool change showed
// (mid sizes, a few rows against a wide B, a small C with a long K), on the benchmark's thread
// count (--threads=1 for 1).
const std::vector<Shape> kMoreShapes = {
    {"100^3", 100, 100, 100, false},
    {"200^3", 200, 200, 200, false},
    {"120x64x256", 120, 64, 256, false},
    {"4x4096x1024", 4, 4096, 1024, false},
    {"8x4096x1024", 8, 4096, 1024, false},
    {"24x4096x1024", 24, 4096, 1024, false},
    {"16x1024x1024", 16, 1024, 1024, false},
    {"8x1000x1000", 8, 1000, 1000, false},
    {"48x4096x1024", 48, 4096, 1024, false},
    {"16x16x8192", 16, 16, 8192, false},
    {"64x64x4096", 64, 64, 4096, false},
    {"64x48x4096", 64, 48, 4096, false},
    {"128x128x4096", 128, 128, 4096, false},
    // Layers of a BERT-base-sized model (hidden 768, feed-forward 3072) at small batches, with B
    // read per call (the JIT packs a constant weight once instead): kiln trailed oneDNN on some of
    // these before the skinny path walked column tiles outer (RESULTS.md, thirteenth session).
    {"8x768x3072", 8, 768, 3072, false},
    {"28x768x3072", 28, 768, 3072, false},
    {"32x768x768", 32, 768, 768, false},
    // Transposed operands: x @ W.T (W [N, K], the layout of a linear layer's weight) as a GEMV,
    // a few rows and a layer; A @ b and A.T @ b for one column b; the peers get the same layouts.
    {"1x4096x4096 x@W.T", 1, 4096, 4096, false, false, true},
    {"8x4096x4096 x@W.T", 8, 4096, 4096, false, false, true},
    {"128x4096x1024 x@W.T", 128, 4096, 1024, false, false, true},
    {"23x57x91 x@W.T", 23, 57, 91, false, false, true},
    {"4096x1x4096 A@b", 4096, 1, 4096, false},
    {"4096x1x4096 A.T@b", 4096, 1, 4096, false, true, false}};

// Operand buffers: from malloc (glibc's 16-byte alignment: where a buffer starts off a 64-byte
// line, every 16-float row of a 16^3 operand straddles two lines), or with --align=64 on 64-byte
// lines, as kiln's own arrays are. Every contender reads and writes the same buffers.
size_t g_operand_align = 0;  // 0: malloc's

template <class T>
struct OperandAllocator {
  using value_type = T;
  OperandAllocator() = default;
  template <class U>
  OperandAllocator(const OperandAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = std::max<size_t>(1, n * sizeof(T));
    void* p = g_operand_align == 0
                  ? std::malloc(bytes)
                  : std::aligned_alloc(g_operand_align, (bytes + g_operand_align - 1) /
                                                            g_operand_align * g_operand_align);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const OperandAllocator<U>&) const {
    return true;
  }
};
using OperandVector = std::vector<float, OperandAllocator<float>>;

struct Operands {
  OperandVector a, b, c, bias;
  explicit Operands(const Shape& s)
      : a(size_t(s.M * s.K)), b(size_t(s.K * s.N)), c(size_t(s.M * s.N)), bias(size_t(s.N)) {
    uint64_t state = uint64_t(s.M * 7919 + s.N * 31 + s.K);
    auto next = [&] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return float(int32_t(state >> 32)) * (1.0f / 2147483648.0f);
    };
    for (auto* v : {&a, &b, &bias})
      for (float& x : *v) x = next();
  }
};

double gelu_ref(double y) { return 0.5 * y * (1.0 + std::erf(y / std::sqrt(2.0))); }

// Checks C against a double-accumulated reference on every element of small results and a
// deterministic sample of large ones. Prints a line only on failure; returns pass/fail.
bool check(const char* who, const Shape& s, const Operands& o, const float* c, bool bias_gelu) {
  const int64_t total = s.M * s.N;
  const int64_t samples = std::min<int64_t>(total, 4096);
  double worst = 0;
  for (int64_t t = 0; t < samples; ++t) {
    const int64_t idx = samples == total ? t : (t * 2654435761ll) % total;
    const int64_t i = idx / s.N, j = idx % s.N;
    double sum = 0, mag = 0;
    for (int64_t k = 0; k < s.K; ++k) {
      const double t = double(o.a[size_t(s.a_t ? k * s.M + i : i * s.K + k)]) *
                       o.b[size_t(s.b_t ? j * s.K + k : k * s.N + j)];
      sum += t;
      mag += std::fabs(t);
    }
    if (bias_gelu) sum = gelu_ref(sum + o.bias[size_t(j)]), mag += 1;
    const double tol = 1e-5 * (1 + mag) + 1.3e-6 * double(s.K) * std::fabs(sum);
    worst = std::max(worst, std::fabs(c[idx] - sum) / tol);
  }
  if (!(worst <= 1.0))
    std::printf("CHECK FAILED: %s on %s: error %.3g x tolerance\n", who, s.name.c_str(), worst);
  return worst <= 1.0;
}

// The contenders capture a pointer to their pool: looking it up in each call (a call and the
// static's guard) cost about 3 ns of a 16^3 GEMM's 48-51 ns (with --align=64, kiln 0.95x of
// LIBXSMM in the table, 1.00x with the pool captured), where LIBXSMM's contender holds its
// kernel's pointer.
kiln::ThreadPool& pool_n() {
  static kiln::ThreadPool pool(kThreads);
  return pool;
}
kiln::ThreadPool& pool_1() {
  static kiln::ThreadPool pool(1);
  return pool;
}

void set_omp_threads(int n) {  // oneDNN from Debian runs on libgomp
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) fn(n);
}

struct Options {
  int rounds = 15;
  double burst_s = 0.05;
  std::string filter;         // substring of the shape name
  bool more = false;          // also kMoreShapes
  std::vector<Shape> shapes;  // --shapes: these instead of kShapes (--more still adds its own)
};

std::vector<std::unique_ptr<Operands>> g_operands;
std::vector<std::shared_ptr<const x86::GemmPlan>> g_plans;
std::vector<std::shared_ptr<const x86::PackedB>> g_packed;
bool g_all_checks_pass = true;

// s's problem without data (what a plan is made from).
x86::GemmProblem problem_of(const Shape& s) {
  x86::GemmProblem p;
  p.M = s.M, p.N = s.N, p.K = s.K;
  p.a = s.a_t ? x86::MatrixRef{nullptr, 1, s.M} : x86::MatrixRef{nullptr, s.K, 1};
  p.b = s.b_t ? x86::MatrixRef{nullptr, 1, s.K} : x86::MatrixRef{nullptr, s.N, 1};
  p.ldc = s.N;
  return p;
}

x86::GemmProblem problem(const Shape& s, Operands& o) {
  x86::GemmProblem p = problem_of(s);
  p.a.data = o.a.data();
  p.b.data = o.b.data();
  p.c = o.c.data();
  return p;
}

// Each contender once against the reference (C pre-filled with garbage), then the paired rounds.
bench::PairedTimes measure(const Shape& s, Operands& o, const std::vector<bench::Contender>& cs,
                           bool bias_gelu, const Options& opt) {
  for (const auto& c : cs) {
    if (c.name == "triad") continue;  // computes no C
    std::fill(o.c.begin(), o.c.end(), -7.0f);
    c.run();
    g_all_checks_pass &= check(c.name.c_str(), s, o, o.c.data(), bias_gelu);
  }
  return bench::run_paired(cs, opt.rounds, opt.burst_s);
}

bench::Contender triad_contender(const Shape& s);
// M = 1 or N = 1: compared with a STREAM triad over its matrix's bytes.
bool gemv(const Shape& s) { return s.M == 1 || s.N == 1; }
int64_t gemv_matrix_elems(const Shape& s) { return (s.M == 1 ? s.N : s.M) * s.K; }

std::vector<bench::Contender> gemm_contenders(const Shape& s, Operands& o) {
  // kiln plans for the benchmark's threads (small shapes too: the plan keeps to the calling
  // thread, or splits from gemm_plan.h's kSmallSplitMinFmas); on small shapes also the plan for
  // one thread, to show what the split gains.
  x86::GemmProblem p = problem(s, o);
  auto plan = x86::GemmPlan::make(p, x86::selected_isa(), kThreads);
  std::vector<bench::Contender> cs;
  kiln::ThreadPool* const pn = &pool_n();
  cs.push_back({"kiln", [plan, p, pn] { plan->run(p, *pn); }, kKilnPoolSettleSeconds});
  if (s.small) {
    auto plan_1t = x86::GemmPlan::make(p, x86::selected_isa(), 1);
    kiln::ThreadPool* const p1 = &pool_1();
    cs.push_back({"kiln_1t", [plan_1t, p, p1] { plan_1t->run(p, *p1); }});
    cs.push_back({"kiln_gemm_call", [p, pn] { x86::gemm(p, *pn); }, kKilnPoolSettleSeconds});
    // What a user of the JIT gets: kiln::jit(matmul) called with caller-owned output (no
    // allocation), i.e. dispatch, variant check and the x86 kernel's launch around the GEMM.
    kiln::Function f = kiln::jit([](kiln::Tensor a, kiln::Tensor b) { return kiln::matmul(a, b); });
    auto io = std::make_shared<std::vector<kiln::Array>>(
        std::vector<kiln::Array>{kiln::Array::view(o.a.data(), {s.M, s.K}, kiln::f32),
                                 kiln::Array::view(o.b.data(), {s.K, s.N}, kiln::f32),
                                 kiln::Array::view(o.c.data(), {s.M, s.N}, kiln::f32)});
    cs.push_back({"kiln_jit_call",
                  [f, io] {
                    f.call(std::span<const kiln::Array>(io->data(), 2),
                           std::span<kiln::Array>(io->data() + 2, 1));
                  },
                  kKilnPoolSettleSeconds});
  }
  float* A = o.a.data();
  float* B = o.b.data();
  float* C = o.c.data();
  const int64_t M = s.M, N = s.N, K = s.K;
  const int64_t lda = s.a_t ? M : K, ldb = s.b_t ? K : N;
  const CBLAS_TRANSPOSE ta = s.a_t ? CblasTrans : CblasNoTrans,
                        tb = s.b_t ? CblasTrans : CblasNoTrans;
  const char da = s.a_t ? 'T' : 'N', db = s.b_t ? 'T' : 'N';
  cs.push_back({"openblas",
                [=] {
                  cblas_sgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0f, A, int(lda), B,
                              int(ldb), 0.0f, C, int(N));
                },
                kOpenblasSpinSeconds});
  cs.push_back({"onednn", [=] { dnnl_sgemm(da, db, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N); }});
  if (s.small && !s.a_t && !s.b_t) {
    // LIBXSMM is column-major: C^T (N x M) = B^T (N x K) * A^T (K x M).
    const libxsmm_blasint m = libxsmm_blasint(N), n = libxsmm_blasint(M), k = libxsmm_blasint(K);
    const libxsmm_blasint lda = m, ldb = k, ldc = m;
    const float alpha = 1.0f, beta = 0.0f;
    libxsmm_smmfunction kernel =
        libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
    if (kernel)
      cs.push_back({"libxsmm", [=] { kernel(B, A, C); }});
    else
      std::printf("LIBXSMM has no kernel for %s\n", s.name.c_str());
  }
  if (gemv(s)) cs.push_back(triad_contender(s));
  return cs;
}

// For the GEMV shape: a float32 STREAM triad moving the same number of bytes as the GEMV's
// matrix, on the same pool, timed in the same rounds, so that "kiln / STREAM triad" compares
// bandwidths measured within a fraction of a second of each other (the one-off triad of the
// limits line moved from 16 to 27 GB/s between two runs on a shared Zen 3).
std::vector<std::unique_ptr<std::vector<float>>> g_triad_arrays;

double triad_bytes(const Shape& s) { return 3.0 * 4.0 * double(gemv_matrix_elems(s) / 3); }

bench::Contender triad_contender(const Shape& s) {
  const int64_t n = gemv_matrix_elems(s) / 3;
  float* abc[3];
  for (int i = 0; i < 3; ++i) {
    g_triad_arrays.push_back(std::make_unique<std::vector<float>>(size_t(n), float(i)));
    abc[i] = g_triad_arrays.back()->data();
  }
  // One range per thread: parallel_for makes n / grain chunks (ceil here would make one).
  const int64_t grain = std::max<int64_t>(16, n / kThreads / 16 * 16);
  return {"triad",
          [n, grain, a = abc[0], b = abc[1], c = abc[2], pn = &pool_n()] {
            pn->parallel_for(n, grain, [&](int64_t begin, int64_t end) {
              bench::triad_f32(a + begin, b + begin, c + begin, 3.0f, end - begin);
            });
          },
          kKilnPoolSettleSeconds};
}

// Linear + bias + GELU (erf): kiln's fused kernel with the weight packed once, against oneDNN
// the way an unfused framework runs it: C = bias rows, sgemm with beta = 1, then oneDNN's JIT
// gelu_erf eltwise in place.
const Shape kLinear{"linear_bias_gelu_128x4096x1024", 128, 4096, 1024, false};

std::vector<bench::Contender> linear_contenders(const Shape& s, Operands& o) {
  x86::GemmProblem p = problem(s, o);
  p.epi.bias = o.bias.data();
  p.epi.act = x86::Activation::gelu;
  auto packed = x86::pack_b(p.b, s.K, s.N);
  g_packed.push_back(packed);
  std::vector<bench::Contender> cs;
  // What the JIT's x86 backend runs for a Linear with a constant weight.
  cs.push_back({"kiln_fused", [p, packed, pn = &pool_n()] { x86::gemm_prepacked(p, *packed, *pn); },
                kKilnPoolSettleSeconds});

  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static dnnl::stream stream(engine);
  dnnl::memory::desc md({s.M, s.N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  auto mem = std::make_shared<dnnl::memory>(md, engine, o.c.data());
  auto pd = dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference,
                                  dnnl::algorithm::eltwise_gelu_erf, md, 0.f, 0.f),
      engine);
  auto gelu = std::make_shared<dnnl::eltwise_forward>(pd);
  float* A = o.a.data();
  float* B = o.b.data();
  float* C = o.c.data();
  const float* bias = o.bias.data();
  const int64_t M = s.M, N = s.N, K = s.K;
  cs.push_back({"onednn_separate", [=] {
                  for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, C + i * N);
                  dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 1.0f, C, N);
                  gelu->execute(stream, {{DNNL_ARG_SRC, *mem}, {DNNL_ARG_DST, *mem}});
                  stream.wait();
                }});
  return cs;
}

std::string fmt(double v, const char* f = "%.1f") {
  if (v <= 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// "1.02x (0.98-1.05)": the median of the per-round ratios and their quartiles.
std::string fmt_ratio(const bench::Spread& r) {
  if (!std::isfinite(r.median)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2fx (%.2f-%.2f)", r.median, r.low, r.high);
  return buf;
}

bench::Spread scaled(bench::Spread r, double by) {
  return {r.median * by, r.low * by, r.high * by};
}

double gflops(const Shape& s, const bench::PairedTimes& t, const std::string& who) {
  const double sec = bench::seconds_of(t, who).median;
  return std::isfinite(sec) ? 2.0 * double(s.M) * double(s.N) * double(s.K) / sec * 1e-9 : 0.0;
}

// "64x64x4096,256x512x512" -> shapes on the benchmark's thread count; false if malformed.
bool parse_shapes(const std::string& list, std::vector<Shape>& out) {
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    long m = 0, n = 0, k = 0;
    int used = 0;
    if (std::sscanf(item.c_str(), "%ldx%ldx%ld%n", &m, &n, &k, &used) != 3 || m < 1 || n < 1 ||
        k < 1)
      return false;
    // Suffixes: a for x.T @ w (A stored [K, M]), t for x @ W.T (B stored [N, K]), at for both.
    const std::string tail = item.substr(size_t(used));
    if (tail != "" && tail != "a" && tail != "t" && tail != "at") return false;
    out.push_back({item, m, n, k, false, tail.find('a') != std::string::npos,
                   tail.find('t') != std::string::npos});
    pos = end + 1;
  }
  return !out.empty();
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--rounds=", 0) == 0) {
      o.rounds = std::max(1, std::atoi(a.c_str() + 9));
    } else if (a.rfind("--burst=", 0) == 0) {
      o.burst_s = std::max(0.001, std::atof(a.c_str() + 8));
    } else if (a.rfind("--filter=", 0) == 0) {
      o.filter = a.substr(9);
    } else if (a == "--more") {
      o.more = true;
    } else if (a == "--align=64") {
      g_operand_align = 64;
    } else if (a.rfind("--threads=", 0) == 0) {
      kThreads = std::max(1, std::atoi(a.c_str() + 10));
    } else if (a.rfind("--shapes=", 0) == 0 && parse_shapes(a.substr(9), o.shapes)) {
    } else {
      std::fprintf(
          stderr,
          "usage: gemm_bench [--rounds=N] [--burst=SECONDS] [--filter=SUBSTR] [--threads=N] "
          "[--more] [--shapes=MxNxK[a|t|at],...] [--align=64]\n");
      std::exit(2);
    }
  }
  return o;
}

// OpenBLAS 0.3.21 (Debian 12) knows no CPU newer than Cooper Lake and falls back to its generic
// SSE3 "Prescott" kernels on others (Emerald Rapids here: 32 GFLOP/s at 512^3 instead of ~200).
// Its core type is read when the library loads, so when it guessed that and the CPU has AVX-512
// (or AVX2), the benchmark restarts itself with the newest matching core type.
// With KILN_ISA=avx2 the peers are capped to AVX2 as well (OpenBLAS's Haswell kernels, oneDNN's
// DNNL_MAX_CPU_ISA=AVX2, LIBXSMM_TARGET=hsw), so that kiln's AVX2 kernels meet what an AVX2
// machine's libraries run, not their AVX-512 kernels. A peer variable already set is kept.
bool peers_capped_to_avx2() {
  const char* isa = std::getenv("KILN_ISA");
  return isa && strcasecmp(isa, "avx2") == 0;
}

// The newest OpenBLAS core type whose kernels this CPU runs (nullptr: none past the generic).
const char* newest_openblas_core() {
  return __builtin_cpu_supports("avx512bf16") ? "Cooperlake"
         : __builtin_cpu_supports("avx512f")  ? "SkylakeX"
         : __builtin_cpu_supports("avx2")     ? "Haswell"
                                              : nullptr;
}

// Set in the environment of the restarted benchmark, so that it tells its own OPENBLAS_CORETYPE
// from one the user's environment set.
constexpr const char* kCoretypeSetHere = "KILN_BENCH_OPENBLAS_CORETYPE_SET";

void match_peer_isas(char** argv) {
  if (peers_capped_to_avx2()) {
    setenv("DNNL_MAX_CPU_ISA", "AVX2", 0);
    setenv("LIBXSMM_TARGET", "hsw", 0);
  }
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const std::string core = openblas_get_corename();
  const char* want = nullptr;
  if (peers_capped_to_avx2() && __builtin_cpu_supports("avx2"))
    want = "Haswell";
  else if (core == "Prescott")
    want = newest_openblas_core();
  if (!want || strcasecmp(core.c_str(), want) == 0) return;
  setenv("OPENBLAS_CORETYPE", want, 1);
  setenv(kCoretypeSetHere, "1", 1);
  execv("/proc/self/exe", argv);
  std::perror("gemm_bench: re-exec with OPENBLAS_CORETYPE failed");
}

}  // namespace

int main(int argc, char** argv) {
  match_peer_isas(argv);
  const Options opt = parse(argc, argv);
  const std::string pin = kiln::bench::pin_process(kThreads);
  openblas_set_num_threads(kThreads);
  set_omp_threads(kThreads);
  libxsmm_init();
  std::printf("machine: %s\n", kiln::bench::machine_line().c_str());
  std::printf(
      "threads: %d (%s); LIBXSMM: 1 thread; rows marked (kiln 1t): kiln's plan keeps to "
      "the calling thread\n",
      kThreads, pin.c_str());
  std::printf("kiln x86 ISA: %s (KILN_ISA caps it); OpenBLAS core type: %s%s\n",
              x86::isa_name().c_str(), openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? " (set by OPENBLAS_CORETYPE)" : "");
  if (peers_capped_to_avx2())
    std::printf("peers capped to AVX2 with kiln: DNNL_MAX_CPU_ISA=%s, LIBXSMM_TARGET=%s\n",
                std::getenv("DNNL_MAX_CPU_ISA"), std::getenv("LIBXSMM_TARGET"));
  // A machine's environment may cap OpenBLAS (one here exported OPENBLAS_CORETYPE=Haswell on an
  // AVX-512 CPU: 191 GFLOP/s at 2048^3 instead of 363): its ratios are then against less than
  // the library's best, which the table must not hide.
  const char* newest = newest_openblas_core();
  if (std::getenv("OPENBLAS_CORETYPE") && !std::getenv(kCoretypeSetHere) &&
      !peers_capped_to_avx2() && newest && strcasecmp(openblas_get_corename(), newest) != 0)
    std::printf(
        "WARNING: OPENBLAS_CORETYPE=%s from the environment keeps OpenBLAS below this CPU's %s "
        "kernels; unset it to compare with OpenBLAS's best\n",
        std::getenv("OPENBLAS_CORETYPE"), newest);
  std::printf("paired rounds: %d, about %.0f ms per contender per round; operands: %s\n",
              opt.rounds, opt.burst_s * 1e3,
              g_operand_align ? "on 64-byte lines (--align=64)" : "from malloc (16-byte aligned)");
  const double peak_n = kiln::bench::fma_peak_gflops(kThreads);
  const double peak_1 = kiln::bench::fma_peak_gflops(1);
  const double stream_n = kiln::bench::stream_triad_gbs(kThreads);
  const char* threads_word = kThreads == 1 ? "thread" : "threads";
  std::printf(
      "limits: FMA peak %.0f GFLOP/s on %d %s, %.0f on 1; STREAM triad %.1f GB/s on %d %s\n",
      peak_n, kThreads, threads_word, peak_1, stream_n, kThreads, threads_word);

  const auto codegen_before = x86::stats();
  std::string table =
      "| shape (MxNxK) | kiln GFLOP/s | oneDNN | OpenBLAS | LIBXSMM (1t) | kiln / best(oneDNN, "
      "OpenBLAS) | kiln / OpenBLAS | kiln / LIBXSMM | kiln / FMA peak |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  std::string notes;
  std::vector<Shape> shapes = opt.shapes.empty() ? kShapes : opt.shapes;
  if (opt.more) shapes.insert(shapes.end(), kMoreShapes.begin(), kMoreShapes.end());
  auto wanted = [&](const Shape& s) {
    if (!opt.shapes.empty() && &s == &kLinear) return false;  // --shapes: those only
    return opt.filter.empty() || s.name.find(opt.filter) != std::string::npos;
  };
  // Every kernel is generated here, before any peer runs (the contenders' plans then find them
  // in the registry): made after an OpenBLAS burst, a plan's codegen was timed while OpenBLAS's
  // threads still spun on both cores (3.9 ms for a 16^3 kernel that takes ~0.02 ms alone).
  for (const Shape& s : shapes) {
    if (!wanted(s)) continue;
    const x86::GemmProblem p = problem_of(s);
    g_plans.push_back(x86::GemmPlan::make(p, x86::selected_isa(), kThreads));
    if (s.small) g_plans.push_back(x86::GemmPlan::make(p, x86::selected_isa(), 1));
  }
  if (wanted(kLinear)) {
    static const float bias_present = 0;  // only whether there is a bias matters to the plan
    x86::GemmProblem p = problem_of(kLinear);
    p.epi.bias = &bias_present;
    p.epi.act = x86::Activation::gelu;
    g_plans.push_back(x86::GemmPlan::make(p, x86::selected_isa(), kThreads, true));
  }
  for (const Shape& s : shapes) {
    if (!wanted(s)) continue;
    g_operands.push_back(std::make_unique<Operands>(s));
    Operands& o = *g_operands.back();
    const bench::PairedTimes t = measure(s, o, gemm_contenders(s, o), false, opt);
    for (const std::string& name : t.names) {
      const bench::Spread sec = bench::seconds_of(t, name);
      const bool triad = name == "triad";
      std::printf("%-16s %-16s %12.2f us (quartiles %.2f-%.2f) %8.1f %s\n", s.name.c_str(),
                  name.c_str(), sec.median * 1e6, sec.low * 1e6, sec.high * 1e6,
                  triad ? triad_bytes(s) / sec.median * 1e-9 : gflops(s, t, name),
                  triad ? "GB/s" : "GFLOP/s");
    }
    const double k = gflops(s, t, "kiln"), d = gflops(s, t, "onednn"), b = gflops(s, t, "openblas"),
                 x = gflops(s, t, "libxsmm");
    // Against the peak of the threads the plan runs on.
    const bool one_thread =
        x86::GemmPlan::make(problem_of(s), x86::selected_isa(), kThreads)->caller_only();
    const double peak = one_thread ? peak_1 : peak_n;
    char row[512];
    std::snprintf(row, sizeof row, "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                  s.name.c_str(), one_thread ? " (kiln 1t)" : "", fmt(k).c_str(), fmt(d).c_str(),
                  fmt(b).c_str(), fmt(x).c_str(),
                  fmt_ratio(bench::paired_speedup(t, "kiln", {"onednn", "openblas"})).c_str(),
                  fmt_ratio(bench::paired_speedup(t, "kiln", {"openblas"})).c_str(),
                  fmt_ratio(bench::paired_speedup(t, "kiln", {"libxsmm"})).c_str(),
                  fmt(k / peak, "%.2f").c_str());
    table += row;
    if (gemv(s)) {
      const double bytes = 4.0 * double(gemv_matrix_elems(s) + s.K + s.M * s.N);
      auto gbs = [&](const char* who) { return bytes / bench::seconds_of(t, who).median * 1e-9; };
      std::snprintf(
          row, sizeof row,
          "GEMV %s: kiln %s GB/s, oneDNN %s GB/s, OpenBLAS %s GB/s, STREAM triad "
          "(f32, same rounds) %s GB/s; kiln / triad = %s; kiln / limits-line triad = "
          "%s\n",
          s.name.c_str(), fmt(gbs("kiln")).c_str(), fmt(gbs("onednn")).c_str(),
          fmt(gbs("openblas")).c_str(),
          fmt(triad_bytes(s) / bench::seconds_of(t, "triad").median * 1e-9).c_str(),
          fmt_ratio(scaled(bench::paired_speedup(t, "kiln", {"triad"}), bytes / triad_bytes(s)))
              .c_str(),
          fmt(gbs("kiln") / stream_n, "%.2f").c_str());
      notes += row;
    }
    if (s.small) {
      std::snprintf(row, sizeof row,
                    "%s: plan->run %.0f ns (the one-thread plan %.0f ns, kiln %s of it), gemm() "
                    "with plan lookup %.0f ns, JIT f.call %.0f ns, LIBXSMM %.0f ns\n",
                    s.name.c_str(), bench::seconds_of(t, "kiln").median * 1e9,
                    bench::seconds_of(t, "kiln_1t").median * 1e9,
                    fmt_ratio(bench::paired_speedup(t, "kiln", {"kiln_1t"})).c_str(),
                    bench::seconds_of(t, "kiln_gemm_call").median * 1e9,
                    bench::seconds_of(t, "kiln_jit_call").median * 1e9,
                    bench::seconds_of(t, "libxsmm").median * 1e9);
      notes += row;
    }
  }
  if (wanted(kLinear)) {
    const Shape& s = kLinear;
    g_operands.push_back(std::make_unique<Operands>(s));
    Operands& o = *g_operands.back();
    const bench::PairedTimes t = measure(s, o, linear_contenders(s, o), true, opt);
    char row[512];
    std::snprintf(row, sizeof row,
                  "Linear+bias+GELU %ldx%ldx%ld: kiln fused %s GFLOP/s, oneDNN sgemm + separate "
                  "bias/GELU %s GFLOP/s: %s\n",
                  long(s.M), long(s.N), long(s.K), fmt(gflops(s, t, "kiln_fused")).c_str(),
                  fmt(gflops(s, t, "onednn_separate")).c_str(),
                  fmt_ratio(bench::paired_speedup(t, "kiln_fused", {"onednn_separate"})).c_str());
    notes += row;
  }
  const auto codegen_after = x86::stats();

  std::printf("\n%s\n%s", table.c_str(), notes.c_str());
  const int64_t kernels = codegen_after.kernels_generated - codegen_before.kernels_generated;
  std::printf(
      "\ncodegen: %ld kernels for these shapes, %.3f ms total, %.3f ms mean, %.3f ms max (whole "
      "process)\n",
      long(kernels), codegen_after.codegen_ms_total - codegen_before.codegen_ms_total,
      kernels ? (codegen_after.codegen_ms_total - codegen_before.codegen_ms_total) / double(kernels)
              : 0.0,
      codegen_after.codegen_ms_max);
  // Plans share kernels: each is listed once (a kernel's name and codegen time identify it).
  std::set<std::pair<std::string, double>> listed;
  for (const auto& plan : g_plans)
    for (const auto& k : plan->kernels())
      if (listed.insert({k.name, k.codegen_ms}).second)
        std::printf("  %-70s %7.3f ms %6ld bytes%s\n", k.name.c_str(), k.codegen_ms,
                    long(k.code_bytes), k.loaded_from_disk ? " (disk cache)" : "");
  std::printf("result checks: %s\n", g_all_checks_pass ? "all passed" : "FAILURES (see above)");
  return g_all_checks_pass ? 0 : 1;
}
