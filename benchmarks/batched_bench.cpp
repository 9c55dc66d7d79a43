// kiln's batched GEMM (x86::gemm_batched: one plan, small items one per task, larger ones one
// after another on all threads) against oneDNN's batched matmul primitive and a loop of OpenBLAS
// cblas_sgemm calls, 2 threads, paired rounds (paired.h). Shapes: attention's two products
// (q @ k.T, B stored transposed, and p @ v) over batch x heads, small items in large batches, and
// a weight shared by the batch (B's batch stride 0).
//   ninja -C build-bench batched_bench && build-bench/benchmarks/batched_bench [--rounds=11]
#include "codegen/x86/gemm.h"
#include "jit/thread_pool.h"
#include "limits.h"
#include "paired.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace x86 = kiln::x86;
namespace bench = kiln::bench;
constexpr int kThreads = 2;
// OpenBLAS's idle threads spin after a call (see gemm_bench.cpp).
constexpr double kOpenblasSpinSeconds = 0.15;

struct Batched {
  std::string name;
  int64_t batch, M, N, K;
  bool b_t = false;       // B stored [N, K] per item (k.T)
  bool b_shared = false;  // one B for every item (batch stride 0)
};

const std::vector<Batched> kShapes = {{"q@k.T 96x[128x128x64]", 96, 128, 128, 64, true},
                                      {"p@v 96x[128x64x128]", 96, 128, 64, 128},
                                      {"q@k.T 48x[384x384x64]", 48, 384, 384, 64, true},
                                      {"256x16^3", 256, 16, 16, 16},
                                      {"64x64^3", 64, 64, 64, 64},
                                      {"1024x8^3", 1024, 8, 8, 8},
                                      {"32x[64x256x512] shared W", 32, 64, 256, 512, false, true},
                                      {"8x[512x512x512]", 8, 512, 512, 512}};

void set_omp_threads(int n) {  // oneDNN from Debian runs on libgomp
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) fn(n);
}

struct Operands {
  std::vector<float> a, b, c;
  explicit Operands(const Batched& s)
      : a(size_t(s.batch * s.M * s.K)),
        b(size_t((s.b_shared ? 1 : s.batch) * s.K * s.N)),
        c(size_t(s.batch * s.M * s.N)) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 13) - 6) / 8.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 7) - 3) / 4.0f;
  }
};

// The largest difference from a double reference over a few sampled items and rows.
double max_error(const Batched& s, const Operands& o) {
  double worst = 0;
  for (int64_t bi : {int64_t{0}, s.batch / 2, s.batch - 1}) {
    const float* A = o.a.data() + bi * s.M * s.K;
    const float* B = o.b.data() + (s.b_shared ? 0 : bi * s.K * s.N);
    const float* C = o.c.data() + bi * s.M * s.N;
    for (int64_t i : {int64_t{0}, s.M - 1})
      for (int64_t j = 0; j < s.N; ++j) {
        double ref = 0;
        for (int64_t k = 0; k < s.K; ++k)
          ref += double(A[i * s.K + k]) * (s.b_t ? B[j * s.K + k] : B[k * s.N + j]);
        worst = std::max(worst, std::fabs(ref - C[i * s.N + j]));
      }
  }
  return worst;
}

std::vector<bench::Contender> contenders(const Batched& s, Operands& o, kiln::ThreadPool& pool) {
  std::vector<bench::Contender> cs;
  float *A = o.a.data(), *B = o.b.data(), *C = o.c.data();
  const int64_t M = s.M, N = s.N, K = s.K, batch = s.batch;
  const int64_t b_stride = s.b_shared ? 0 : K * N;
  x86::GemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.a = x86::MatrixRef{A, K, 1};
  p.b = s.b_t ? x86::MatrixRef{B, 1, K} : x86::MatrixRef{B, N, 1};
  p.c = C;
  p.ldc = N;
  const x86::BatchStrides st{M * K, b_stride, M * N, 0};
  cs.push_back({"kiln", [p, batch, st, &pool] { x86::gemm_batched(p, batch, st, pool); }});

  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static dnnl::stream stream(engine);
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a_md({batch, M, K}, dt::f32, dnnl::memory::dims{M * K, K, 1});
  const dnnl::memory::desc b_md(
      {s.b_shared ? 1 : batch, K, N}, dt::f32,
      s.b_t ? dnnl::memory::dims{b_stride, 1, K} : dnnl::memory::dims{b_stride, N, 1});
  const dnnl::memory::desc c_md({batch, M, N}, dt::f32, dnnl::memory::dims{M * N, N, 1});
  auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine);
  auto mm = std::make_shared<dnnl::matmul>(pd);
  auto am = std::make_shared<dnnl::memory>(a_md, engine, A);
  auto bm = std::make_shared<dnnl::memory>(b_md, engine, B);
  auto cm = std::make_shared<dnnl::memory>(c_md, engine, C);
  cs.push_back(
      {"onednn", [mm, am, bm, cm] {
         mm->execute(stream, {{DNNL_ARG_SRC, *am}, {DNNL_ARG_WEIGHTS, *bm}, {DNNL_ARG_DST, *cm}});
         stream.wait();
       }});
  const bool bt = s.b_t;
  cs.push_back({"openblas_loop",
                [=] {
                  for (int64_t i = 0; i < batch; ++i)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, int(M),
                                int(N), int(K), 1.0f, A + i * M * K, int(K), B + i * b_stride,
                                int(bt ? K : N), 0.0f, C + i * M * N, int(N));
                },
                kOpenblasSpinSeconds});
  return cs;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 11;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--rounds=", 0) == 0) {
      rounds = std::max(1, std::atoi(a.c_str() + 9));
    } else {
      std::fprintf(stderr, "usage: batched_bench [--rounds=N]\n");
      return 2;
    }
  }
  const std::string pin = bench::pin_process(kThreads);
  openblas_set_num_threads(kThreads);
  set_omp_threads(kThreads);
  std::printf("machine: %s\nthreads: %d (%s); kiln x86 ISA: %s; paired rounds: %d\n",
              bench::machine_line().c_str(), kThreads, pin.c_str(), x86::isa_name().c_str(),
              rounds);
  static kiln::ThreadPool pool(kThreads);
  bool ok = true;
  std::string table =
      "| batch x [MxNxK] | kiln GFLOP/s | oneDNN matmul | OpenBLAS loop | kiln / oneDNN | kiln / "
      "OpenBLAS loop |\n|---|---|---|---|---|---|\n";
  for (const Batched& s : kShapes) {
    Operands o(s);
    const auto cs = contenders(s, o, pool);
    for (const auto& c : cs) {
      std::fill(o.c.begin(), o.c.end(), -7.0f);
      c.run();
      const double err = max_error(s, o);
      if (!(err <= 1e-3 * double(s.K))) {
        std::printf("CHECK FAILED: %s %s max error %g\n", s.name.c_str(), c.name.c_str(), err);
        ok = false;
      }
    }
    const bench::PairedTimes t = bench::run_paired(cs, rounds, 0.05);
    const double flops = 2.0 * double(s.batch * s.M * s.N * s.K);
    auto gf = [&](const char* who) { return flops / bench::seconds_of(t, who).median * 1e-9; };
    auto ratio = [&](const char* other) {
      const bench::Spread r = bench::paired_speedup(t, "kiln", {other});
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2fx (%.2f-%.2f)", r.median, r.low, r.high);
      return std::string(buf);
    };
    char row[512];
    std::snprintf(row, sizeof row, "| %s | %.1f | %.1f | %.1f | %s | %s |\n", s.name.c_str(),
                  gf("kiln"), gf("onednn"), gf("openblas_loop"), ratio("onednn").c_str(),
                  ratio("openblas_loop").c_str());
    table += row;
    std::fflush(stdout);
  }
  std::printf("\n%s", table.c_str());
  std::printf("results checked against a double reference: %s\n", ok ? "all pass" : "FAILED");
  return ok ? 0 : 1;
}
