// Issue 2 benchmark: compile time of the demo MLP through the C++ API.
//
//   KILN_NUM_THREADS=2 build-bench/benchmarks/compile_bench [--procs N] [--batches 1,32,256]
//
// The MLP: x[B,256] @ w1[256,512] + b1 -> gelu (exact) -> @ w2[512,10] + b2 -> softmax(axis -1),
// with the weights passed as arguments. Every cold measurement runs in a FRESH PROCESS (this
// program re-executes itself with --child), with KILN_CACHE=off, so no memory cache, no disk cache
// and no LLVM state survive from an earlier measurement. In each child:
//   cold         first call of a new kiln::Function (trace + passes + LLVM compile of every kernel,
//                including starting LLVM ORC once, + one run);
//   trace        the time spent inside the traced C++ lambda (recording the IR);
//   llvm         sum of the per-kernel LLVM compile times kiln logs at KILN_LOG=debug (lowering,
//                O3, object emission, linking; the first kernel also pays LLVM/ORC start-up);
//   other        cold - trace - llvm - steady (passes, fusion, cache keys, dispatch);
//   warm-proc    first call at batch B+1 after kiln::clear_cache() in the same process: new kernels
//                (distinct shapes, nothing memoized), LLVM already started;
//   mem-hit      first call of a second kiln::Function at batch B: traced again, every kernel from
//                the in-memory cache;
//   steady       median time per call once compiled (5 repetitions of >= 0.2 s each).
// A disk-cache pass runs two more children with KILN_CACHE=on and a fresh KILN_CACHE_DIR and
// reports the second one's first call and its disk hits. Results of the first call are checked
// against a double-precision scalar reference.
#include <kiln/kiln.h>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <span>
#include <vector>

#include <time.h>
#include <unistd.h>

namespace {

using kiln::Tensor;
using Clock = std::chrono::steady_clock;

constexpr int64_t kIn = 256, kHidden = 512, kOut = 10;
double g_trace_ms = 0;
// Workaround mode: also return both matmul results, which makes kiln store them instead of
// inlining them into their elementwise consumer (see the note printed when the plain MLP fails).
bool g_mm_outputs = false;

double
cpu_ms() {  // CPU time of the whole process (all threads), less sensitive to a loaded machine
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

kiln::Function make_mlp() {
  return kiln::jit([](Tensor x, Tensor w1, Tensor b1, Tensor w2, Tensor b2) {
    auto t0 = Clock::now();
    Tensor m1 = kiln::matmul(x, w1);
    Tensor h = kiln::gelu(m1 + b1);
    Tensor m2 = kiln::matmul(h, w2);
    Tensor y = kiln::softmax(m2 + b2, -1);
    g_trace_ms += ms_since(t0);
    return g_mm_outputs ? std::vector<Tensor>{y, m1, m2} : std::vector<Tensor>{y};
  });
}

struct Inputs {
  std::vector<kiln::Array> args;
  kiln::Array out, m1, m2;
};

Inputs make_inputs(int64_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  auto arr = [&](std::vector<int64_t> shape, float scale) {
    kiln::Array a = kiln::Array::empty(shape, kiln::f32);
    std::uniform_real_distribution<float> d(-scale, scale);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = d(rng);
    return a;
  };
  Inputs in;
  in.args = {arr({batch, kIn}, 1.f), arr({kIn, kHidden}, 0.1f), arr({kHidden}, 0.1f),
             arr({kHidden, kOut}, 0.1f), arr({kOut}, 0.1f)};
  in.out = kiln::Array::empty({batch, kOut}, kiln::f32);
  in.m1 = kiln::Array::empty({batch, kHidden}, kiln::f32);
  in.m2 = kiln::Array::empty({batch, kOut}, kiln::f32);
  return in;
}

double check(const Inputs& in) {
  const float* x = in.args[0].data<float>();
  const float* w1 = in.args[1].data<float>();
  const float* b1 = in.args[2].data<float>();
  const float* w2 = in.args[3].data<float>();
  const float* b2 = in.args[4].data<float>();
  const float* y = in.out.data<float>();
  int64_t batch = in.args[0].shape()[0];
  double max_err = 0;
  std::vector<double> h(kHidden), o(kOut);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < kHidden; ++j) {
      double s = b1[j];
      for (int64_t k = 0; k < kIn; ++k) s += double(x[b * kIn + k]) * w1[k * kHidden + j];
      h[j] = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
    }
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < kOut; ++j) {
      double s = b2[j];
      for (int64_t k = 0; k < kHidden; ++k) s += h[k] * w2[k * kOut + j];
      o[j] = s;
      m = std::max(m, s);
    }
    for (int64_t j = 0; j < kOut; ++j) sum += (o[j] = std::exp(o[j] - m));
    for (int64_t j = 0; j < kOut; ++j)
      max_err = std::max(max_err, std::fabs(o[j] / sum - y[b * kOut + j]));
  }
  return max_err;
}

void call(const kiln::Function& f, Inputs& in) {
  kiln::Array out[3] = {in.out, in.m1, in.m2};
  f.call(in.args, std::span<kiln::Array>(out, g_mm_outputs ? 3 : 1));
}

// One fresh process: prints "RESULT k=v ..." on stdout; kiln's debug log goes to stderr.
int child(int64_t batch) {
  g_mm_outputs = std::getenv("KILN_BENCH_MM_OUTPUTS") != nullptr;
  kiln::set_num_threads(kiln::global_options().num_threads > 0 ? kiln::global_options().num_threads
                                                               : 2);
  Inputs in = make_inputs(batch, 7);
  std::printf("PHASE cold\n");
  std::fflush(stdout);
  kiln::Function f = make_mlp();
  g_trace_ms = 0;
  double c0 = cpu_ms();
  auto t0 = Clock::now();
  call(f, in);
  double cold = ms_since(t0);
  double cold_cpu = cpu_ms() - c0;
  double trace = g_trace_ms;
  double err = check(in);
  kiln::Stats st = f.stats();
  int64_t kernels = 0;
  for (auto& [b, c] : st.backend_kernels) kernels += c;

  // Steady state: 5 repetitions of >= 0.2 s, median time per call.
  for (int i = 0; i < 3; ++i) call(f, in);
  std::vector<double> per;
  for (int r = 0; r < 5; ++r) {
    int64_t n = 0;
    auto s0 = Clock::now();
    do {
      call(f, in);
      ++n;
    } while (ms_since(s0) < 200);
    per.push_back(ms_since(s0) / n);
  }
  std::sort(per.begin(), per.end());
  double steady = per[2];

  std::printf("PHASE memhit\n");
  std::fflush(stdout);
  kiln::Function f2 = make_mlp();
  t0 = Clock::now();
  call(f2, in);
  double memhit = ms_since(t0);
  int64_t memhits = f2.stats().kernel_memory_hits;

  std::printf("PHASE warmproc\n");
  std::fflush(stdout);
  kiln::clear_cache();
  Inputs in2 = make_inputs(batch + 1, 8);
  kiln::Function f3 = make_mlp();
  t0 = Clock::now();
  call(f3, in2);
  double warmproc = ms_since(t0);
  double err2 = check(in2);

  std::printf(
      "RESULT cold=%.3f cold_cpu=%.3f trace=%.3f steady=%.5f memhit=%.3f memhits=%lld "
      "warmproc=%.3f kernels=%lld "
      "compiles=%lld disk_hits=%lld err=%.3g err2=%.3g\n",
      cold, cold_cpu, trace, steady, memhit, static_cast<long long>(memhits), warmproc,
      static_cast<long long>(kernels), static_cast<long long>(st.compiles),
      static_cast<long long>(st.disk_hits), err, err2);
  std::fflush(stdout);
  return 0;
}

struct ChildResult {
  std::map<std::string, double> v;
  double llvm_cold_ms = 0;  // sum of kernel compile times logged during the cold phase
  double llvm_first_kernel_ms = 0;
  int llvm_kernels = 0;
  bool ok = false;
  std::string raw;
};

ChildResult run_child(const std::string& env, int64_t batch) {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) std::strcpy(self, "compile_bench");
  std::string cmd =
      env + " KILN_LOG=debug '" + self + "' --child " + std::to_string(batch) + " 2>&1";
  ChildResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char line[8192];
  std::string phase;
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    r.raw += s;
    if (s.rfind("PHASE ", 0) == 0) {
      phase = s.substr(6, s.find('\n') - 6);
    } else if (s.rfind("RESULT ", 0) == 0) {
      size_t pos = 7;
      while (pos < s.size()) {
        size_t eq = s.find('=', pos), sp = s.find_first_of(" \n", eq);
        if (eq == std::string::npos) break;
        r.v[s.substr(pos, eq - pos)] = std::atof(s.substr(eq + 1, sp - eq - 1).c_str());
        pos = sp + 1;
      }
      r.ok = true;
    } else if (auto k = s.find("compiled kernel "); k != std::string::npos && phase == "cold") {
      // "kiln debug: compiled kernel NAME (llvm, 12.3 ms, key ...)"
      auto c = s.find(", ", k);
      if (c != std::string::npos) {
        double ms = std::atof(s.c_str() + c + 2);
        if (r.llvm_kernels == 0) r.llvm_first_kernel_ms = ms;
        r.llvm_cold_ms += ms;
        ++r.llvm_kernels;
      }
    }
  }
  int rc = pclose(p);
  if (rc != 0) r.ok = false;
  return r;
}

struct Stat {
  double med, lo, hi;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (!n) return {NAN, NAN, NAN};
  return {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v.front(), v.back()};
}

std::string fmt_stat(const Stat& s, int prec = 1) {
  return fmt::format("{:.{}f} ({:.{}f}..{:.{}f})", s.med, prec, s.lo, prec, s.hi, prec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--child") return child(std::atoll(argv[2]));

  int procs = 5;
  std::vector<int64_t> batches = {1, 32, 256};
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--procs")
      procs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--batches") {
      batches.clear();
      std::string s = argv[++i];
      for (size_t pos = 0; pos < s.size();) {
        size_t c = s.find(',', pos);
        if (c == std::string::npos) c = s.size();
        batches.push_back(std::atoll(s.substr(pos, c - pos).c_str()));
        pos = c + 1;
      }
    }
  }
  const char* t = std::getenv("KILN_NUM_THREADS");
  std::string threads = t && std::atoi(t) > 0 ? t : "2";
  kiln::set_num_threads(std::atoi(threads.c_str()));
  fmt::print("{}", kiln::doctor_report());
  fmt::print("threads: {} (KILN_NUM_THREADS in every child)\n", threads);
  fmt::print(
      "each cold measurement: a fresh process, KILN_CACHE=off; {} processes per batch size\n\n",
      procs);

  bool ok = true;
  std::string env = "KILN_CACHE=off KILN_NUM_THREADS=" + threads;
  {
    ChildResult probe = run_child(env, batches.empty() ? 32 : batches[0]);
    if (!probe.ok) {
      ok = false;
      std::string why;
      for (size_t pos = 0; pos < probe.raw.size();) {
        size_t nl = probe.raw.find('\n', pos);
        std::string l =
            probe.raw.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        if (l.find("debug:") == std::string::npos && l.rfind("PHASE", 0) != 0 && !l.empty())
          why += "  " + l + "\n";
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
      fmt::print("THE DEMO MLP FAILS TO COMPILE in this build:\n{}", why);
      fmt::print(
          "Measuring a WORKAROUND instead: the same MLP also returning both matmul results (so "
          "they are\n"
          "stored, not inlined into their elementwise consumer). Times below are for that "
          "variant.\n\n");
      env += " KILN_BENCH_MM_OUTPUTS=1";
    }
  }
  fmt::print(
      "| batch | cold first call ms | same, process CPU ms | trace ms | LLVM compile ms (kernels; "
      "1st kernel incl. ORC start) | other ms | "
      "cold kernels, warm process ms | memory-cache hit first call ms | steady ms/call | max abs "
      "err |\n");
  fmt::print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int64_t b : batches) {
    std::vector<double> cold, cold_cpu, trace, llvm, first_k, other, warmproc, memhit, steady;
    double err = 0;
    int kernels = 0;
    for (int p = 0; p < procs; ++p) {
      ChildResult r = run_child(env, b);
      if (!r.ok) {
        fmt::print("child failed for batch {}:\n{}\n", b, r.raw);
        ok = false;
        continue;
      }
      auto& v = r.v;
      cold.push_back(v["cold"]);
      cold_cpu.push_back(v["cold_cpu"]);
      trace.push_back(v["trace"]);
      llvm.push_back(r.llvm_cold_ms);
      first_k.push_back(r.llvm_first_kernel_ms);
      other.push_back(v["cold"] - v["trace"] - r.llvm_cold_ms - v["steady"]);
      warmproc.push_back(v["warmproc"]);
      memhit.push_back(v["memhit"]);
      steady.push_back(v["steady"]);
      err = std::max({err, v["err"], v["err2"]});
      kernels = r.llvm_kernels ? r.llvm_kernels : static_cast<int>(v["kernels"]);
      if (v["memhits"] < v["kernels"])
        fmt::print("note: memory-cache pass had {} hits for {} kernels\n", v["memhits"],
                   v["kernels"]);
    }
    if (cold.empty()) continue;
    Stat fk = stat(first_k);
    fmt::print(
        "| {} | {} | {} | {} | {} ({} kernels; 1st {:.1f}) | {} | {} | {} | {} | {:.2g} {} |\n", b,
        fmt_stat(stat(cold)), fmt_stat(stat(cold_cpu)), fmt_stat(stat(trace), 2),
        fmt_stat(stat(llvm)), kernels, fk.med, fmt_stat(stat(other)), fmt_stat(stat(warmproc)),
        fmt_stat(stat(memhit), 2), fmt_stat(stat(steady), 4), err, err < 1e-4 ? "ok" : "FAIL");
    if (!(err < 1e-4)) ok = false;
  }

  // Disk cache: two fresh processes sharing a fresh cache directory; the second's first call.
  char dir[] = "/tmp/kiln_compile_bench_XXXXXX";
  if (mkdtemp(dir)) {
    std::string denv =
        std::string("KILN_CACHE=on KILN_CACHE_DIR=") + dir + " KILN_NUM_THREADS=" + threads;
    int64_t b = batches.empty() ? 32 : batches[batches.size() / 2];
    ChildResult r1 = run_child(denv, b);
    ChildResult r2 = run_child(denv, b);
    if (r1.ok && r2.ok)
      fmt::print(
          "\ndisk cache (KILN_CACHE=on, fresh dir, batch {}): first process cold {:.1f} ms; second "
          "process first "
          "call {:.1f} ms with {} disk hits{}\n",
          b, r1.v["cold"], r2.v["cold"], r2.v["disk_hits"],
          r2.v["disk_hits"] == 0 ? " (the disk cache is not consulted by this build)" : "");
    std::string rm = std::string("rm -rf '") + dir + "'";
    if (std::system(rm.c_str()) != 0) fmt::print("could not remove {}\n", dir);
  }
  return ok ? 0 : 1;
}
