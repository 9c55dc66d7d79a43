// Limits measured in-process: FMA peak and STREAM triad, on pinned threads.
#include "limits.h"

#include "jit/device.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <functional>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace kiln::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Runs fn(thread_index) on `threads` pinned threads started together; returns the slowest
// thread's seconds.
template <typename Fn>
double run_pinned(int threads, Fn fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> secs(size_t(threads), 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      pin_this_thread(t);
      ready.fetch_add(1);
      while (!go.load()) {
      }
      auto start = Clock::now();
      fn(t);
      secs[size_t(t)] = std::chrono::duration<double>(Clock::now() - start).count();
    });
  }
  while (ready.load() < threads) {
  }
  go.store(true);
  for (auto& th : pool) th.join();
  return *std::max_element(secs.begin(), secs.end());
}

// Independent FMA chains held in named registers (an array of accumulators ends up on the stack
// and measures load/store throughput instead). 12 chains cover 2 ports x 4-5 cycles of latency
// and, with the two operands, fit the 16 ymm registers of AVX2: with more, the compiler spills
// chains to the stack and the loop measures store forwarding instead of the FMA units.
#define KILN_FMA12(T, FMA)                                                                     \
  /* distinct starting values, or the compiler merges identical chains into one */             \
  T a0 = init, a1 = a0 + init, a2 = a1 + init, a3 = a2 + init, a4 = a3 + init, a5 = a4 + init; \
  T a6 = a5 + init, a7 = a6 + init, a8 = a7 + init, a9 = a8 + init, a10 = a9 + init;           \
  T a11 = a10 + init;                                                                          \
  for (long it = 0; it < iters; ++it) {                                                        \
    a0 = FMA(a0, x, y);                                                                        \
    a1 = FMA(a1, x, y);                                                                        \
    a2 = FMA(a2, x, y);                                                                        \
    a3 = FMA(a3, x, y);                                                                        \
    a4 = FMA(a4, x, y);                                                                        \
    a5 = FMA(a5, x, y);                                                                        \
    a6 = FMA(a6, x, y);                                                                        \
    a7 = FMA(a7, x, y);                                                                        \
    a8 = FMA(a8, x, y);                                                                        \
    a9 = FMA(a9, x, y);                                                                        \
    a10 = FMA(a10, x, y);                                                                      \
    a11 = FMA(a11, x, y);                                                                      \
  }                                                                                            \
  T s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
constexpr int kFmaChains = 12;

#if defined(__AVX512F__)
__attribute__((noinline)) float fma_loop_512(long iters) {
  const __m512 init = _mm512_set1_ps(1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  KILN_FMA12(__m512, _mm512_fmadd_ps)
  return _mm512_reduce_add_ps(s);
}
#endif

__attribute__((noinline)) float fma_loop_256(long iters) {
  const __m256 init = _mm256_set1_ps(1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  KILN_FMA12(__m256, _mm256_fmadd_ps)
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}
#undef KILN_FMA12

std::atomic<float> g_sink{0};

}  // namespace

// Runs a measurement in a forked child: the child has only the calling thread, so worker threads
// that peer libraries (OpenBLAS, oneDNN's OpenMP) started at load time and that may spin cannot
// steal the cores being measured. Falls back to measuring here if fork fails.
static double in_child(const std::function<double()>& measure) {
  int fds[2];
  if (pipe(fds) != 0) return measure();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return measure();
  }
  if (pid == 0) {
    close(fds[0]);
    double v = measure();
    ssize_t w = write(fds[1], &v, sizeof v);
    _exit(w == sizeof v ? 0 : 1);
  }
  close(fds[1]);
  double v = 0;
  ssize_t r = read(fds[0], &v, sizeof v);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return r == sizeof v ? v : measure();
}

void pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

std::string pin_process(int threads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < threads; ++i) CPU_SET(i, &set);
  const bool ok = sched_setaffinity(0, sizeof(set), &set) == 0;
  return std::string(ok ? "process pinned to CPUs 0-" : "could not pin the process to CPUs 0-") +
         std::to_string(threads - 1);
}

static double fma_peak_gflops_here(int threads, double seconds) {
#if defined(__AVX512F__)
  const bool avx512 = __builtin_cpu_supports("avx512f");
#else
  const bool avx512 = false;
#endif
  const double flops_per_iter = double(kFmaChains) * (avx512 ? 16 : 8) * 2;
  auto loop = [&](long iters) {
#if defined(__AVX512F__)
    if (avx512) return fma_loop_512(iters);
#endif
    return fma_loop_256(iters);
  };
  // Calibrate the iteration count on one thread, then take the best of 3 trials.
  long iters = 1 << 16;
  for (;;) {
    auto start = Clock::now();
    g_sink.store(loop(iters));
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (s > seconds / 4) {
      iters = long(double(iters) * seconds / s);
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    double s = run_pinned(threads, [&](int) { g_sink.store(loop(iters)); });
    best = std::max(best, flops_per_iter * double(iters) * threads / s * 1e-9);
  }
  return best;
}

static double stream_triad_gbs_here(int threads, size_t n) {
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  auto slice = [&](int t, size_t& lo, size_t& hi) {
    lo = n * size_t(t) / size_t(threads);
    hi = n * size_t(t + 1) / size_t(threads);
  };
  run_pinned(threads, [&](int t) {  // first touch on the thread that will use the slice
    size_t lo, hi;
    slice(t, lo, hi);
    for (size_t i = lo; i < hi; ++i) a[i] = 0, b[i] = 1.0, c[i] = 2.0;
  });
  double best = 0;
  for (int pass = 0; pass < 6; ++pass) {
    double s = run_pinned(threads, [&](int t) {
      size_t lo, hi;
      slice(t, lo, hi);
      double* __restrict pa = a.get();
      const double* __restrict pb = b.get();
      const double* __restrict pc = c.get();
      for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + 3.0 * pc[i];
    });
    if (pass > 0) best = std::max(best, 24.0 * double(n) / s * 1e-9);
  }
  g_sink.store(float(a[n / 2]));
  return best;
}

__attribute__((noinline, optimize("O3", "tree-vectorize"))) void triad_f32(
    float* __restrict a, const float* __restrict b, const float* __restrict c, float s,
    std::ptrdiff_t n) {
  for (std::ptrdiff_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

std::string machine_line() {
  // Sessions have run on more than one kind of host under one brand string ("Intel(R) Xeon(R)
  // Processor"): the family, model and caches tell the tables of different CPUs apart.
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU", family_model;
  auto value = [&] { return line.substr(line.find(':') + 2); };
  while (std::getline(f, line) && !line.empty()) {
    if (line.rfind("model name", 0) == 0)
      model = value();
    else if (line.rfind("cpu family", 0) == 0)
      family_model += "family " + value();
    else if (line.rfind("model\t", 0) == 0)
      family_model += " model " + value();
    else if (line.rfind("stepping", 0) == 0)
      family_model += " stepping " + value();
  }
  if (!family_model.empty()) model += " (" + family_model + ")";
  std::string isa;
  auto add = [&](bool has, const char* feat) {
    if (has) isa += std::string(isa.empty() ? "" : " ") + feat;
  };
  add(__builtin_cpu_supports("avx2"), "avx2");
  add(__builtin_cpu_supports("fma"), "fma");
  add(__builtin_cpu_supports("avx512f"), "avx512f");
  add(__builtin_cpu_supports("avx512bw"), "avx512bw");
  add(__builtin_cpu_supports("avx512vl"), "avx512vl");
  const kiln::CpuInfo& cpu = kiln::cpu_info();
  char caches[160];
  const std::string ways = cpu.l1d_ways > 0 ? " " + std::to_string(cpu.l1d_ways) + "-way" : "";
  std::snprintf(caches, sizeof caches, "L1d %lld KiB%s, L2 %lld KiB, L3 %lld MiB",
                static_cast<long long>(cpu.l1d_bytes >> 10), ways.c_str(),
                static_cast<long long>(cpu.l2_bytes >> 10),
                static_cast<long long>(cpu.l3_bytes >> 20));
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs, " + isa +
         "; " + caches;
}

double fma_peak_gflops(int threads, double seconds) {
  return in_child([&] { return fma_peak_gflops_here(threads, seconds); });
}

double stream_triad_gbs(int threads, size_t n) {
  return in_child([&] { return stream_triad_gbs_here(threads, n); });
}

}  // namespace kiln::bench
