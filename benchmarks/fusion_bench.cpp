// Issue 2 benchmark: a 5-op fused elementwise chain over 16M float32 elements and a row softmax of
// 4096 x 4096 float32, each as GB/s and as a ratio to a STREAM triad measured in this run on the
// same number of threads; the chain also against the same five ops run unfused (one kiln kernel per
// op, every intermediate materialized).
//
//   KILN_NUM_THREADS=2 build-bench/benchmarks/fusion_bench [google-benchmark flags]
//
// Defaults: 2 threads (KILN_NUM_THREADS overrides), 9 repetitions randomly interleaved, at least
// 0.2 s per repetition, medians and min/max of the repetitions. The ratios use this file's own
// STREAM triad (a[i] = b[i] + s * c[i] over three float32 arrays of the chain's size, statically
// split over a team of the same number of threads), run as a Google Benchmark interleaved with the
// kiln runs so each ratio pairs runs of the same round; the shared limits.h triad (doubles, pinned
// threads, best of 6 passes) is measured too and quoted as a second, stricter denominator.
// Every benchmarked output is checked once against a scalar double-precision reference after the
// runs; a mismatch makes the program exit 1.
#include "limits.h"

#include <kiln/kiln.h>

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

constexpr int64_t kChainN = int64_t{1} << 24;  // 16M float32 elements (64 MiB per array)
constexpr int64_t kRows = 4096, kCols = 4096;  // softmax
constexpr double kMul = 1.5, kAdd = 0.25;
// Diagnostics: the same kernels on data that fits in the two cores' L2 (2 MiB each), a ceiling set
// by the arithmetic rather than by DRAM. In-cache GB/s near the DRAM triad means compute-bound.
constexpr int64_t kSmallN = int64_t{1} << 18;  // 3 arrays x 1 MiB
constexpr int64_t kSmallRows = 64;             // 64 x 4096: 1 MiB in, 1 MiB out

int g_threads = 2;

// ---------------------------------------------------------------------------------------------
// STREAM triad on a team of g_threads threads (the caller is thread 0), static contiguous split.

class Team {
 public:
  explicit Team(int n) : n_(n) {
    for (int t = 1; t < n; ++t) workers_.emplace_back([this, t] { loop(t); });
  }
  ~Team() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      ++gen_;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return n_; }
  void run(const std::function<void(int, int)>& fn) {
    if (n_ == 1) {
      fn(0, 1);
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      fn_ = &fn;
      pending_ = n_ - 1;
      ++gen_;
    }
    cv_.notify_all();
    fn(0, n_);
    std::unique_lock<std::mutex> l(mu_);
    done_.wait(l, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  void loop(int t) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int, int)>* fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return gen_ != seen; });
        seen = gen_;
        if (stop_) return;
        fn = fn_;
      }
      (*fn)(t, n_);
      {
        std::lock_guard<std::mutex> l(mu_);
        --pending_;
      }
      done_.notify_one();
    }
  }
  int n_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  uint64_t gen_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  const std::function<void(int, int)>* fn_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Buffers (kiln-allocated, 64-byte aligned) shared by the benchmarks.

using kiln::Tensor;

struct Data {
  kiln::Array x, z, y_fused, y_unfused, t1, t2, t3, t4;  // chain
  kiln::Array ta, tb, tc;                                // triad
  kiln::Array sx, sy;                                    // softmax
  kiln::Array cx, cz, cy, csx, csy;                      // in-cache diagnostics
  // The chain fused (one kernel) and the same five ops as five functions (five kernels).
  kiln::Function fused =
      kiln::jit([](Tensor x, Tensor z) { return kiln::tanh(x * kMul + kAdd) * z - x; });
  kiln::Function u1 = kiln::jit([](Tensor x) { return x * kMul; });
  kiln::Function u2 = kiln::jit([](Tensor t) { return t + kAdd; });
  kiln::Function u3 = kiln::jit([](Tensor t) { return kiln::tanh(t); });
  kiln::Function u4 = kiln::jit([](Tensor t, Tensor z) { return t * z; });
  kiln::Function u5 = kiln::jit([](Tensor t, Tensor x) { return t - x; });
  kiln::Function softmax = kiln::jit([](Tensor x) { return kiln::softmax(x, -1); });
  kiln::Function fused_small =
      kiln::jit([](Tensor x, Tensor z) { return kiln::tanh(x * kMul + kAdd) * z - x; });
  kiln::Function softmax_small = kiln::jit([](Tensor x) { return kiln::softmax(x, -1); });
  std::unique_ptr<Team> team;
};
Data* g;

void fill(kiln::Array& a, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = d(rng);
}

void run_triad() {
  float* a = g->ta.data<float>();
  const float* b = g->tb.data<float>();
  const float* c = g->tc.data<float>();
  g->team->run([&](int t, int n) {
    int64_t per = (kChainN + n - 1) / n;
    per = (per + 15) / 16 * 16;
    int64_t begin = std::min<int64_t>(kChainN, t * per),
            end = std::min<int64_t>(kChainN, begin + per);
    kiln::bench::triad_f32(a + begin, b + begin, c + begin, 3.0f, end - begin);
  });
}

void run_fused() {
  const kiln::Array in[2] = {g->x, g->z};
  kiln::Array out[1] = {g->y_fused};
  g->fused.call(in, out);
}

void run_unfused() {
  const kiln::Array a1[1] = {g->x};
  kiln::Array o1[1] = {g->t1};
  g->u1.call(a1, o1);
  const kiln::Array a2[1] = {g->t1};
  kiln::Array o2[1] = {g->t2};
  g->u2.call(a2, o2);
  const kiln::Array a3[1] = {g->t2};
  kiln::Array o3[1] = {g->t3};
  g->u3.call(a3, o3);
  const kiln::Array a4[2] = {g->t3, g->z};
  kiln::Array o4[1] = {g->t4};
  g->u4.call(a4, o4);
  const kiln::Array a5[2] = {g->t4, g->x};
  kiln::Array o5[1] = {g->y_unfused};
  g->u5.call(a5, o5);
}

void run_softmax() {
  const kiln::Array in[1] = {g->sx};
  kiln::Array out[1] = {g->sy};
  g->softmax.call(in, out);
}

void run_fused_small() {
  const kiln::Array in[2] = {g->cx, g->cz};
  kiln::Array out[1] = {g->cy};
  g->fused_small.call(in, out);
}

void run_softmax_small() {
  const kiln::Array in[1] = {g->csx};
  kiln::Array out[1] = {g->csy};
  g->softmax_small.call(in, out);
}

// Bytes each benchmark reads + writes once (writes counted once, no write-allocate), STREAM style.
constexpr double kTriadBytes = 3.0 * kChainN * 4;
constexpr double kChainBytes = 3.0 * kChainN * 4;                            // read x, z; write y
constexpr double kUnfusedBytes = (2 + 2 + 2 + 3 + 3) * double(kChainN) * 4;  // every op's traffic
constexpr double kSoftmaxBytes = 2.0 * kRows * kCols * 4;                    // read x; write y
constexpr double kSmallChainBytes = 3.0 * kSmallN * 4;
constexpr double kSmallSoftmaxBytes = 2.0 * kSmallRows * kCols * 4;

template <void (*Fn)()>
void bench(benchmark::State& state, double bytes) {
  for (auto _ : state) Fn();
  state.SetBytesProcessed(static_cast<int64_t>(bytes * static_cast<double>(state.iterations())));
  state.counters["threads"] = g_threads;
}

void BM_triad(benchmark::State& s) { bench<run_triad>(s, kTriadBytes); }
void BM_chain_fused(benchmark::State& s) { bench<run_fused>(s, kChainBytes); }
void BM_chain_unfused(benchmark::State& s) { bench<run_unfused>(s, kUnfusedBytes); }
void BM_softmax_4096x4096(benchmark::State& s) { bench<run_softmax>(s, kSoftmaxBytes); }
void BM_chain_fused_incache(benchmark::State& s) { bench<run_fused_small>(s, kSmallChainBytes); }
void BM_softmax_64x4096_incache(benchmark::State& s) {
  bench<run_softmax_small>(s, kSmallSoftmaxBytes);
}

// ---------------------------------------------------------------------------------------------
// Reporter: prints Google Benchmark's aggregates and keeps every repetition for the summary.

struct Rep {
  int index;
  double seconds;  // per iteration
  int64_t iterations;
};
std::map<std::string, std::vector<Rep>> g_reps;

class Reporter : public benchmark::ConsoleReporter {
 public:
  Reporter() : ConsoleReporter(isatty(1) ? OO_Defaults : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> aggregates;
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate) {
        aggregates.push_back(r);
      } else if (!r.error_occurred) {
        g_reps[r.run_name.function_name].push_back(
            {static_cast<int>(r.repetition_index),
             r.real_accumulated_time / static_cast<double>(r.iterations), r.iterations});
      }
    }
    if (!aggregates.empty()) ConsoleReporter::ReportRuns(aggregates);
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Summary {
  double med_s = NAN, min_s = NAN, max_s = NAN, min_run_s = NAN;
};
Summary summarize(const std::string& name) {
  Summary s;
  auto it = g_reps.find(name);
  if (it == g_reps.end() || it->second.empty()) return s;
  std::vector<double> t;
  double min_run = 1e30;
  for (const Rep& r : it->second) {
    t.push_back(r.seconds);
    min_run = std::min(min_run, r.seconds * static_cast<double>(r.iterations));
  }
  s.med_s = median(t);
  s.min_s = *std::min_element(t.begin(), t.end());
  s.max_s = *std::max_element(t.begin(), t.end());
  s.min_run_s = min_run;
  return s;
}

// Ratio of a to b per repetition index (runs of the same round, close in time), then
// median/min/max.
std::tuple<double, double, double> paired_ratio(const std::string& num, const std::string& den,
                                                bool invert) {
  std::map<int, double> d;
  for (const Rep& r : g_reps[den]) d[r.index] = r.seconds;
  std::vector<double> ratios;
  for (const Rep& r : g_reps[num]) {
    auto it = d.find(r.index);
    if (it == d.end()) continue;
    // time ratio den/num = bandwidth ratio num/den when the byte counts match.
    ratios.push_back(invert ? r.seconds / it->second : it->second / r.seconds);
  }
  if (ratios.empty()) return {NAN, NAN, NAN};
  return {median(ratios), *std::min_element(ratios.begin(), ratios.end()),
          *std::max_element(ratios.begin(), ratios.end())};
}

// ---------------------------------------------------------------------------------------------
// Correctness of the benchmarked outputs against a scalar double reference.

bool check_chain(const kiln::Array& y, const char* what) {
  const float* x = g->x.data<float>();
  const float* z = g->z.data<float>();
  const float* p = y.data<float>();
  double max_err = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < kChainN; ++i) {
    double r = std::tanh(double(x[i]) * kMul + kAdd) * double(z[i]) - double(x[i]);
    double e = std::fabs(double(p[i]) - r);
    max_err = std::max(max_err, e);
    if (!(e <= 1e-5 * (1.0 + std::fabs(r)))) ++bad;
  }
  fmt::print("check {:<15} max abs err {:.3g} vs double reference: {}\n", what, max_err,
             bad ? fmt::format("FAIL ({} elements off)", bad) : "ok");
  return bad == 0;
}

bool check_softmax() {
  const float* x = g->sx.data<float>();
  const float* y = g->sy.data<float>();
  double max_rel = 0;
  int64_t bad = 0;
  std::vector<double> e(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    const float* xr = x + r * kCols;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < kCols; ++c) m = std::max(m, double(xr[c]));
    for (int64_t c = 0; c < kCols; ++c) s += (e[c] = std::exp(double(xr[c]) - m));
    for (int64_t c = 0; c < kCols; ++c) {
      double ref = e[c] / s;
      double got = y[r * kCols + c];
      double rel = std::fabs(got - ref) / std::max(ref, 1e-30);
      if (ref > 1e-30) max_rel = std::max(max_rel, rel);
      if (!(std::fabs(got - ref) <= 1e-5 * ref + 1e-12)) ++bad;
    }
  }
  fmt::print("check {:<15} max rel err {:.3g} vs double reference: {}\n", "softmax", max_rel,
             bad ? fmt::format("FAIL ({} elements off)", bad) : "ok");
  return bad == 0;
}

// What the generated code looks like: vector width used, scalar float ops, calls.
void describe_kernels(const char* what, const kiln::Inspection& ins) {
  for (const auto& k : ins.kernels) {
    int zmm = 0, ymm = 0, xmm_only = 0, scalar_ss = 0, calls = 0, lines = 0, fma = 0, div = 0,
        movabs = 0;
    size_t pos = 0;
    const std::string& a = k.asm_text;
    while (pos < a.size()) {
      size_t nl = a.find('\n', pos);
      if (nl == std::string::npos) nl = a.size();
      std::string_view l(a.data() + pos, nl - pos);
      pos = nl + 1;
      if (l.empty() || l[0] != '\t' || l.size() < 2 || l[1] == '.') continue;
      ++lines;
      if (l.find("zmm") != l.npos)
        ++zmm;
      else if (l.find("ymm") != l.npos)
        ++ymm;
      else if (l.find("xmm") != l.npos)
        ++xmm_only;
      auto mn = l.substr(1, l.find_first_of(" \t", 1) - 1);
      if (mn.size() > 3 && mn.substr(mn.size() - 2) == "ss" && mn[0] == 'v' && mn != "vmovss")
        ++scalar_ss;
      if (mn == "call" || mn == "callq") ++calls;
      if (mn.rfind("vfmadd", 0) == 0 || mn.rfind("vfmsub", 0) == 0 || mn.rfind("vfnmadd", 0) == 0)
        ++fma;
      if (mn.rfind("vdivp", 0) == 0) ++div;
      if (mn == "movabsq") ++movabs;
    }
    std::string ops;
    for (const auto& o : k.ops) ops += (ops.empty() ? "" : ",") + o;
    fmt::print(
        "kernel {:<8} {} ({}): {} instrs, {} zmm, {} ymm, {} xmm-only, {} scalar *ss arith, {} "
        "fma, {} vdivp, "
        "{} movabsq, {} calls; ops {}\n",
        what, k.name, k.backend, lines, zmm, ymm, xmm_only, scalar_ss, fma, div, movabs, calls,
        ops);
  }
}

std::string read_loadavg() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[128] = {};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* t = std::getenv("KILN_NUM_THREADS"); t && std::atoi(t) > 0)
    g_threads = std::atoi(t);
  std::string pinned =
      kiln::bench::pin_process(g_threads);  // before kiln's pool starts its threads
  kiln::set_num_threads(g_threads);
  fmt::print("machine: {}\n{}\n", kiln::bench::machine_line(), pinned);
  fmt::print("{}", kiln::doctor_report());
  fmt::print("benchmark threads: {} (kiln::set_num_threads and the triad team)\n", g_threads);
  fmt::print("load average before: {}\n", read_loadavg());

  Data d;
  g = &d;
  d.team = std::make_unique<Team>(g_threads);
  auto arr = [](int64_t n) { return kiln::Array::empty({n}, kiln::f32); };
  d.x = arr(kChainN);
  d.z = arr(kChainN);
  for (auto* a : {&d.y_fused, &d.y_unfused, &d.t1, &d.t2, &d.t3, &d.t4, &d.ta, &d.tb, &d.tc}) {
    *a = arr(kChainN);
    std::memset(a->data(), 0, kChainN * 4);  // fault pages in before timing
  }
  fill(d.x, -2.f, 2.f, 1);
  fill(d.z, -1.f, 1.f, 2);
  fill(d.tb, -1.f, 1.f, 3);
  fill(d.tc, -1.f, 1.f, 4);
  d.sx = kiln::Array::empty({kRows, kCols}, kiln::f32);
  d.sy = kiln::Array::empty({kRows, kCols}, kiln::f32);
  fill(d.sx, -4.f, 4.f, 5);
  std::memset(d.sy.data(), 0, kRows * kCols * 4);
  d.cx = arr(kSmallN);
  d.cz = arr(kSmallN);
  d.cy = arr(kSmallN);
  std::memcpy(d.cx.data(), d.x.data(), kSmallN * 4);
  std::memcpy(d.cz.data(), d.z.data(), kSmallN * 4);
  d.csx = kiln::Array::empty({kSmallRows, kCols}, kiln::f32);
  d.csy = kiln::Array::empty({kSmallRows, kCols}, kiln::f32);
  std::memcpy(d.csx.data(), d.sx.data(), kSmallRows * kCols * 4);

  // Compile and warm up (three calls each) outside the timed region.
  for (int i = 0; i < 3; ++i) {
    run_triad();
    run_fused();
    run_unfused();
    run_softmax();
    run_fused_small();
    run_softmax_small();
  }
  auto kernels = [](const kiln::Function& f) {
    int64_t n = 0;
    for (auto& [b, c] : f.stats().backend_kernels) n += c;
    return n;
  };
  fmt::print("kernels per call: fused chain {}, unfused chain {}, softmax {}\n", kernels(d.fused),
             kernels(d.u1) + kernels(d.u2) + kernels(d.u3) + kernels(d.u4) + kernels(d.u5),
             kernels(d.softmax));
  describe_kernels("chain", d.fused.inspect({d.x, d.z}));
  describe_kernels("softmax", d.softmax.inspect({d.sx}));
  std::fflush(stdout);

  // Defaults, overridable on the command line (later flags win).
  std::vector<std::string> args = {argv[0], "--benchmark_repetitions=9",
                                   "--benchmark_enable_random_interleaving=true"};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  int cargc = static_cast<int>(cargs.size());
  benchmark::Initialize(&cargc, cargs.data());
  auto reg = [](const char* name, void (*fn)(benchmark::State&)) {
    benchmark::RegisterBenchmark(name, fn)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.2);
  };
  reg("BM_triad", BM_triad);
  reg("BM_chain_fused", BM_chain_fused);
  reg("BM_chain_unfused", BM_chain_unfused);
  reg("BM_softmax_4096x4096", BM_softmax_4096x4096);
  reg("BM_chain_fused_incache", BM_chain_fused_incache);
  reg("BM_softmax_64x4096_incache", BM_softmax_64x4096_incache);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  // The outputs now hold the results of the last benchmarked calls: check them once.
  std::fflush(stdout);
  fmt::print(
      "\n");  // the console reporter leaves a colour-reset escape at the start of the next line
  bool ok = check_chain(d.y_fused, "chain fused");
  ok &= check_chain(d.y_unfused, "chain unfused");
  ok &= check_softmax();

  Summary fc = summarize("BM_chain_fused_incache"), sc = summarize("BM_softmax_64x4096_incache");
  double limits_triad = kiln::bench::stream_triad_gbs(g_threads);
  Summary tri = summarize("BM_triad"), fu = summarize("BM_chain_fused"),
          un = summarize("BM_chain_unfused"), sm = summarize("BM_softmax_4096x4096");
  auto gbs = [](double bytes, double s) { return bytes / s / 1e9; };
  auto [rf, rf_lo, rf_hi] = paired_ratio("BM_chain_fused", "BM_triad", false);
  auto [rs, rs_lo, rs_hi] = paired_ratio("BM_softmax_4096x4096", "BM_triad", false);
  auto [ru, ru_lo, ru_hi] = paired_ratio("BM_chain_unfused", "BM_chain_fused", true);
  size_t reps = g_reps["BM_triad"].size();
  fmt::print(
      "\nsummary: {} threads, {} repetitions each (random interleaving), shortest repetition "
      "{:.2f} s, "
      "load average after: {}\n",
      g_threads, reps, std::min({tri.min_run_s, fu.min_run_s, un.min_run_s, sm.min_run_s}),
      read_loadavg());
  fmt::print(
      "| benchmark | median ms | GB/s median (min..max) | ratio (median of paired reps, min..max) "
      "| goal |\n");
  fmt::print("| --- | --- | --- | --- | --- |\n");
  fmt::print("| STREAM triad, 3 x 16M f32 | {:.2f} | {:.1f} ({:.1f}..{:.1f}) | 1 | |\n",
             tri.med_s * 1e3, gbs(kTriadBytes, tri.med_s), gbs(kTriadBytes, tri.max_s),
             gbs(kTriadBytes, tri.min_s));
  fmt::print(
      "| fused chain tanh(x*1.5+0.25)*z-x, 16M f32 | {:.2f} | {:.1f} ({:.1f}..{:.1f}) | {:.2f} of "
      "triad ({:.2f}..{:.2f}) | >= 0.70 {} |\n",
      fu.med_s * 1e3, gbs(kChainBytes, fu.med_s), gbs(kChainBytes, fu.max_s),
      gbs(kChainBytes, fu.min_s), rf, rf_lo, rf_hi, rf >= 0.7 ? "met" : "MISSED");
  fmt::print(
      "| same chain unfused (5 kernels) | {:.2f} | {:.1f} ({:.1f}..{:.1f}) actual traffic; {:.1f} "
      "counting the fused bytes | fused is {:.2f}x faster ({:.2f}..{:.2f}) | |\n",
      un.med_s * 1e3, gbs(kUnfusedBytes, un.med_s), gbs(kUnfusedBytes, un.max_s),
      gbs(kUnfusedBytes, un.min_s), gbs(kChainBytes, un.med_s), ru, ru_lo, ru_hi);
  fmt::print(
      "| row softmax 4096x4096 f32 | {:.2f} | {:.1f} ({:.1f}..{:.1f}) | {:.2f} of triad "
      "({:.2f}..{:.2f}) | >= 0.50 {} |\n",
      sm.med_s * 1e3, gbs(kSoftmaxBytes, sm.med_s), gbs(kSoftmaxBytes, sm.max_s),
      gbs(kSoftmaxBytes, sm.min_s), rs, rs_lo, rs_hi, rs >= 0.5 ? "met" : "MISSED");
  fmt::print(
      "| diagnostic: fused chain in L2 (256K f32) | {:.3f} | {:.1f} ({:.1f}..{:.1f}) | {:.2f}x the "
      "DRAM triad | |\n",
      fc.med_s * 1e3, gbs(kSmallChainBytes, fc.med_s), gbs(kSmallChainBytes, fc.max_s),
      gbs(kSmallChainBytes, fc.min_s),
      gbs(kSmallChainBytes, fc.med_s) / gbs(kTriadBytes, tri.med_s));
  fmt::print(
      "| diagnostic: softmax in L2 (64x4096 f32) | {:.3f} | {:.1f} ({:.1f}..{:.1f}) | {:.2f}x the "
      "DRAM triad | |\n",
      sc.med_s * 1e3, gbs(kSmallSoftmaxBytes, sc.med_s), gbs(kSmallSoftmaxBytes, sc.max_s),
      gbs(kSmallSoftmaxBytes, sc.min_s),
      gbs(kSmallSoftmaxBytes, sc.med_s) / gbs(kTriadBytes, tri.med_s));
  fmt::print(
      "limits.h STREAM triad (f64, pinned, best of 6): {:.1f} GB/s; medians against it: fused "
      "chain {:.2f}, "
      "softmax {:.2f}\n",
      limits_triad, gbs(kChainBytes, fu.med_s) / limits_triad,
      gbs(kSoftmaxBytes, sm.med_s) / limits_triad);
  benchmark::Shutdown();
  return ok ? 0 : 1;
}
