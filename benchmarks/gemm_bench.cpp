// kiln's x86 GEMM against oneDNN (dnnl_sgemm), OpenBLAS (cblas_sgemm) and LIBXSMM
// (libxsmm_smmdispatch, 1 thread, small shapes), and against the FMA peak and STREAM triad
// measured in this run. Prints Google Benchmark's table, then a ratio table (medians).
//   ninja -C build-x86 gemm_bench && ./build-x86/benchmarks/gemm_bench
#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"
#include "limits.h"

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dlfcn.h>
#include <libxsmm.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <dnnl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace x86 = kiln::x86;
constexpr int kThreads = 2;

struct Shape {
  std::string name;
  int64_t M, N, K;
  bool small;  // compared with LIBXSMM on 1 thread
};

const std::vector<Shape> kShapes = {{"2048^3", 2048, 2048, 2048, false},
                                    {"512^3", 512, 512, 512, false},
                                    {"128x4096x1024", 128, 4096, 1024, false},
                                    {"64^3", 64, 64, 64, true},
                                    {"16^3", 16, 16, 16, true},
                                    {"23x57x91", 23, 57, 91, true},
                                    {"1x4096x4096", 1, 4096, 4096, false}};

struct Operands {
  std::vector<float> a, b, c, bias;
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
      sum += double(o.a[size_t(i * s.K + k)]) * o.b[size_t(k * s.N + j)];
      mag += std::fabs(double(o.a[size_t(i * s.K + k)]) * o.b[size_t(k * s.N + j)]);
    }
    if (bias_gelu) sum = gelu_ref(sum + o.bias[size_t(j)]), mag += 1;
    const double tol = 1e-5 * (1 + mag) + 1.3e-6 * double(s.K) * std::fabs(sum);
    worst = std::max(worst, std::fabs(c[idx] - sum) / tol);
  }
  if (!(worst <= 1.0))
    std::printf("CHECK FAILED: %s on %s: error %.3g x tolerance\n", who, s.name.c_str(), worst);
  return worst <= 1.0;
}

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

// Medians (seconds per iteration) and relative spread, by benchmark name, from the reporter.
struct Result {
  double median = 0, stddev = 0;
};
std::map<std::string, Result> g_results;

class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const double secs = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      std::string name = r.run_name.str();
      name = name.substr(0, name.find("/min_time"));
      if (r.aggregate_name == "median") g_results[name].median = secs;
      if (r.aggregate_name == "stddev") g_results[name].stddev = secs;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

std::vector<std::unique_ptr<Operands>> g_operands;
std::vector<std::shared_ptr<const x86::GemmPlan>> g_plans;
std::vector<std::shared_ptr<const x86::PackedB>> g_packed;
bool g_all_checks_pass = true;

void add(const std::string& name, std::function<void()> fn) {
  fn();  // warm-up (JIT, packing of constants, page faults)
  benchmark::RegisterBenchmark(name.c_str(),
                               [fn](benchmark::State& st) {
                                 for (auto _ : st) fn();
                               })
      ->MinTime(0.2)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

x86::GemmProblem problem(const Shape& s, Operands& o) {
  x86::GemmProblem p;
  p.M = s.M, p.N = s.N, p.K = s.K;
  p.a = x86::MatrixRef{o.a.data(), s.K, 1};
  p.b = x86::MatrixRef{o.b.data(), s.N, 1};
  p.c = o.c.data();
  p.ldc = s.N;
  return p;
}

void register_shape(const Shape& s) {
  g_operands.push_back(std::make_unique<Operands>(s));
  Operands& o = *g_operands.back();
  const int kiln_threads = s.small ? 1 : kThreads;
  kiln::ThreadPool& pool = s.small ? pool_1() : pool_n();
  x86::GemmProblem p = problem(s, o);
  auto plan = x86::GemmPlan::make(p, x86::selected_isa(), kiln_threads);
  g_plans.push_back(plan);
  auto run_check = [&](const char* who, const std::function<void()>& fn) {
    std::fill(o.c.begin(), o.c.end(), -7.0f);
    fn();
    g_all_checks_pass &= check(who, s, o, o.c.data(), false);
  };
  auto kiln_fn = [plan, p, &pool] { plan->run(p, pool); };
  run_check("kiln", kiln_fn);
  add("gemm/" + s.name + "/kiln", kiln_fn);
  if (s.small) {
    auto dispatch_fn = [p] { x86::gemm(p, pool_1()); };  // with the plan-cache lookup
    add("gemm/" + s.name + "/kiln_gemm_call", dispatch_fn);
  }
  float* A = o.a.data();
  float* B = o.b.data();
  float* C = o.c.data();
  const int64_t M = s.M, N = s.N, K = s.K;
  auto blas_fn = [=] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f, A, int(K),
                B, int(N), 0.0f, C, int(N));
  };
  run_check("openblas", blas_fn);
  add("gemm/" + s.name + "/openblas", blas_fn);
  auto dnnl_fn = [=] { dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); };
  run_check("onednn", dnnl_fn);
  add("gemm/" + s.name + "/onednn", dnnl_fn);
  if (s.small) {
    // LIBXSMM is column-major: C^T (N x M) = B^T (N x K) * A^T (K x M).
    const libxsmm_blasint m = libxsmm_blasint(N), n = libxsmm_blasint(M), k = libxsmm_blasint(K);
    const libxsmm_blasint lda = m, ldb = k, ldc = m;
    const float alpha = 1.0f, beta = 0.0f;
    libxsmm_smmfunction kernel =
        libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
    if (kernel) {
      auto xsmm_fn = [=] { kernel(B, A, C); };
      run_check("libxsmm", xsmm_fn);
      add("gemm/" + s.name + "/libxsmm", xsmm_fn);
    } else {
      std::printf("LIBXSMM has no kernel for %s\n", s.name.c_str());
    }
  }
}

// Linear + bias + GELU (erf): kiln's fused kernel with the weight packed once, against oneDNN
// the way an unfused framework runs it: C = bias rows, sgemm with beta = 1, then oneDNN's JIT
// gelu_erf eltwise in place.
const Shape kLinear{"linear_bias_gelu_128x4096x1024", 128, 4096, 1024, false};

void register_linear() {
  const Shape& s = kLinear;
  g_operands.push_back(std::make_unique<Operands>(s));
  Operands& o = *g_operands.back();
  x86::GemmProblem p = problem(s, o);
  p.epi.bias = o.bias.data();
  p.epi.act = x86::Activation::gelu;
  auto packed = x86::pack_b(p.b, s.K, s.N);
  g_packed.push_back(packed);
  // What the JIT's x86 backend runs for a Linear with a constant weight.
  auto kiln_fn = [p, packed] { x86::gemm_prepacked(p, *packed, pool_n()); };
  std::fill(o.c.begin(), o.c.end(), -7.0f);
  kiln_fn();
  g_all_checks_pass &= check("kiln fused", s, o, o.c.data(), true);
  add("linear/" + s.name + "/kiln_fused", kiln_fn);

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
  auto dnnl_fn = [=] {
    for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, C + i * N);
    dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 1.0f, C, N);
    gelu->execute(stream, {{DNNL_ARG_SRC, *mem}, {DNNL_ARG_DST, *mem}});
    stream.wait();
  };
  std::fill(o.c.begin(), o.c.end(), -7.0f);
  dnnl_fn();
  g_all_checks_pass &= check("onednn+separate", s, o, o.c.data(), true);
  add("linear/" + s.name + "/onednn_separate", dnnl_fn);
}

double median(const std::string& name) {
  auto it = g_results.find(name);
  return it == g_results.end() ? 0.0 : it->second.median;
}

std::string fmt(double v, const char* f = "%.1f") {
  if (v <= 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string pin = kiln::bench::pin_process(kThreads);
  openblas_set_num_threads(kThreads);
  set_omp_threads(kThreads);
  libxsmm_init();
  std::printf("machine: %s\n", kiln::bench::machine_line().c_str());
  std::printf("threads: %d (%s); LIBXSMM and kiln on small shapes: 1 thread\n", kThreads,
              pin.c_str());
  std::printf("kiln x86 ISA: %s (KILN_ISA caps it)\n", x86::isa_name().c_str());
  const double peak_n = kiln::bench::fma_peak_gflops(kThreads);
  const double peak_1 = kiln::bench::fma_peak_gflops(1);
  const double stream_n = kiln::bench::stream_triad_gbs(kThreads);
  std::printf(
      "limits: FMA peak %.0f GFLOP/s on %d threads, %.0f on 1; STREAM triad %.1f GB/s on %d "
      "threads\n",
      peak_n, kThreads, peak_1, stream_n, kThreads);

  const auto codegen_before = x86::stats();
  for (const Shape& s : kShapes) register_shape(s);
  register_linear();
  const auto codegen_after = x86::stats();

  benchmark::Initialize(&argc, argv);
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  // The ratio table (markdown, for benchmarks/RESULTS.md).
  std::printf(
      "\n| shape (MxNxK) | kiln GFLOP/s | oneDNN | OpenBLAS | LIBXSMM (1t) | kiln / best(oneDNN, "
      "OpenBLAS) | "
      "kiln / OpenBLAS | kiln / LIBXSMM | kiln / FMA peak |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : kShapes) {
    const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
    auto gf = [&](const char* impl) {
      const double t = median("gemm/" + s.name + "/" + impl);
      return t > 0 ? flops / t * 1e-9 : 0.0;
    };
    const double k = gf("kiln"), d = gf("onednn"), b = gf("openblas"), x = gf("libxsmm");
    const double peak = s.small ? peak_1 : peak_n;
    std::printf("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name.c_str(),
                s.small ? " (kiln 1t)" : "", fmt(k).c_str(), fmt(d).c_str(), fmt(b).c_str(),
                fmt(x).c_str(), fmt(k / std::max(d, b), "%.2fx").c_str(),
                fmt(k / b, "%.2fx").c_str(), fmt(x > 0 ? k / x : 0, "%.2fx").c_str(),
                fmt(k / peak, "%.2f").c_str());
  }
  {
    const Shape& s = kShapes.back();  // 1x4096x4096
    const double bytes = 4.0 * double(s.K * s.N + s.K + s.N);
    auto gbs = [&](const char* impl) {
      const double t = median("gemm/" + s.name + "/" + impl);
      return t > 0 ? bytes / t * 1e-9 : 0.0;
    };
    std::printf(
        "\nGEMV %s: kiln %s GB/s, oneDNN %s GB/s, OpenBLAS %s GB/s; kiln / STREAM triad = %s\n",
        s.name.c_str(), fmt(gbs("kiln")).c_str(), fmt(gbs("onednn")).c_str(),
        fmt(gbs("openblas")).c_str(), fmt(gbs("kiln") / stream_n, "%.2f").c_str());
    const double t16 = median("gemm/16^3/kiln"), t16d = median("gemm/16^3/kiln_gemm_call");
    std::printf("16^3: plan->run %.0f ns, gemm() with plan lookup %.0f ns\n", t16 * 1e9,
                t16d * 1e9);
  }
  {
    const Shape& s = kLinear;
    const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
    const double tk = median("linear/" + s.name + "/kiln_fused"),
                 td = median("linear/" + s.name + "/onednn_separate");
    std::printf(
        "\nLinear+bias+GELU %ldx%ldx%ld: kiln fused %s GFLOP/s, oneDNN sgemm + separate bias/GELU "
        "%s GFLOP/s: "
        "%s\n",
        long(s.M), long(s.N), long(s.K), fmt(flops / tk * 1e-9).c_str(),
        fmt(flops / td * 1e-9).c_str(), fmt(td / tk, "%.2fx").c_str());
  }
  const int64_t kernels = codegen_after.kernels_generated - codegen_before.kernels_generated;
  std::printf(
      "\ncodegen: %ld kernels for these shapes, %.3f ms total, %.3f ms mean, %.3f ms max (whole "
      "process)\n",
      long(kernels), codegen_after.codegen_ms_total - codegen_before.codegen_ms_total,
      kernels ? (codegen_after.codegen_ms_total - codegen_before.codegen_ms_total) / double(kernels)
              : 0.0,
      codegen_after.codegen_ms_max);
  for (const auto& plan : g_plans)
    for (const auto& k : plan->kernels())
      std::printf("  %-70s %7.3f ms %6ld bytes\n", k.name.c_str(), k.codegen_ms,
                  long(k.code_bytes));
  std::printf("result checks: %s\n", g_all_checks_pass ? "all passed" : "FAILURES (see above)");
  return g_all_checks_pass ? 0 : 1;
}
