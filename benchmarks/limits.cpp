// Limits measured in-process: FMA peak and STREAM triad, on pinned threads.
#include "limits.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
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

#if defined(__AVX512F__)
__attribute__((noinline)) float fma_loop_512(long iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[5]), "+v"(acc[10]), "+v"(acc[15]));
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
#endif

__attribute__((noinline)) float fma_loop_256(long iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it) {
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    __asm__ volatile("" : "+x"(acc[0]), "+x"(acc[6]), "+x"(acc[11]));
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

std::atomic<float> g_sink{0};

}  // namespace

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

double fma_peak_gflops(int threads, double seconds) {
#if defined(__AVX512F__)
  const bool avx512 = __builtin_cpu_supports("avx512f");
#else
  const bool avx512 = false;
#endif
  const double flops_per_iter = avx512 ? 16.0 * 16 * 2 : 12.0 * 8 * 2;
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

double stream_triad_gbs(int threads, size_t n) {
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

std::string machine_line() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string isa;
  auto add = [&](bool has, const char* feat) {
    if (has) isa += std::string(isa.empty() ? "" : " ") + feat;
  };
  add(__builtin_cpu_supports("avx2"), "avx2");
  add(__builtin_cpu_supports("fma"), "fma");
  add(__builtin_cpu_supports("avx512f"), "avx512f");
  add(__builtin_cpu_supports("avx512bw"), "avx512bw");
  add(__builtin_cpu_supports("avx512vl"), "avx512vl");
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs, " + isa;
}

}  // namespace kiln::bench
