// Issue 4 benchmark: the disk cache seen from a new process.
//
//   build-c2/benchmarks/cache_bench [--reps 5] [--batch 1] [--kernels 100]
//
// Every measurement runs in a NEW PROCESS: this program re-executes itself (/proc/self/exe) with
// --child MODE and a chosen environment (KILN_CACHE=on, KILN_CACHE_DIR=<private mkdtemp dir>,
// KILN_NUM_THREADS=1, KILN_LOG=warn). The directories are removed at the end.
//
// 1. Time to first result of the demo model (examples/mlp_softmax.cpp: x[B,256] @ w1[256,512] + b1
//    -> gelu -> @ w2[512,10] + b2 -> softmax), checked against a double reference:
//      cold  an empty cache directory per repetition;
//      warm  one directory filled once by an untimed process, then read by every repetition.
//    Two clocks: "first call" is the first model(args) in the child (trace + passes + kernel
//    compile or disk load + run); "spawn to result" is from just before posix_spawn in the parent
//    to the moment the child holds the checked result (steady_clock is CLOCK_MONOTONIC, shared by
//    both processes), so it includes exec, loading libkiln/libLLVM and static initialisation. The
//    whole process wall time (spawn to exit) is printed too. Medians over --reps repetitions.
// 2. Load time per LLVM kernel on a disk hit, two ways, over --kernels distinct LLVM kernels
//    (elementwise and reduction functions that differ in a constant) stored by an untimed process:
//      direct  in a new process: DiskCache::load (open, read, xxh3-128 check, manifest compare) and
//              the link (llvmjit::load_object into its own JITDylib + symbol lookup), timed per
//              entry; the first link also starts ORC and is reported apart;
//      jit     in a new process, through kiln::Function: first call of function i (its kernel from
//              disk) minus the first call of an identical second function (its kernel from the
//              memory cache: same trace, passes, key and run, no disk, no link). The difference is
//              what a disk hit costs per kernel. The same difference in a process with an empty
//              cache gives the per-kernel compile time it replaces.
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache/disk_cache.h"
#include "cache/key.h"
#include "codegen/llvm/jit_engine.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kIn = 256, kHidden = 512, kOut = 10;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t i =
      static_cast<size_t>(std::min<double>(v.size() - 1, std::floor(p * (v.size() - 1) + 0.5)));
  return v[i];
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / v.size();
}

// ---------------------------------------------------------------------------------------------
// Children.

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double demo_max_error(const std::vector<float>& x, int64_t batch, const std::vector<float>& w1,
                      const std::vector<float>& b1, const std::vector<float>& w2,
                      const std::vector<float>& b2, const float* got) {
  double max_err = 0;
  std::vector<double> h(kHidden), logits(kOut);
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t j = 0; j < kHidden; ++j) {
      double acc = b1[j];
      for (int64_t k = 0; k < kIn; ++k) acc += double(x[r * kIn + k]) * w1[k * kHidden + j];
      h[j] = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
    }
    double mx = -INFINITY;
    for (int64_t j = 0; j < kOut; ++j) {
      double acc = b2[j];
      for (int64_t k = 0; k < kHidden; ++k) acc += h[k] * w2[k * kOut + j];
      logits[j] = acc;
      mx = std::max(mx, acc);
    }
    double sum = 0;
    for (int64_t j = 0; j < kOut; ++j) sum += std::exp(logits[j] - mx);
    for (int64_t j = 0; j < kOut; ++j)
      max_err = std::max(max_err, std::abs(got[r * kOut + j] - std::exp(logits[j] - mx) / sum));
  }
  return max_err;
}

int child_demo(int64_t batch, Clock::time_point main_start) {
  std::mt19937 rng(42);
  auto w1 = random_vector(kIn * kHidden, rng, 0.08f);
  auto b1 = random_vector(kHidden, rng, 0.1f);
  auto w2 = random_vector(kHidden * kOut, rng, 0.08f);
  auto b2 = random_vector(kOut, rng, 0.1f);
  auto x = random_vector(batch * kIn, rng, 1.0f);
  kiln::Function model = kiln::jit(
      [](kiln::Tensor x, kiln::Tensor w1, kiln::Tensor b1, kiln::Tensor w2, kiln::Tensor b2) {
        kiln::Tensor h = kiln::gelu(kiln::matmul(x, w1) + b1);
        return kiln::softmax(kiln::matmul(h, w2) + b2, -1);
      });
  std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {batch, kIn}, kiln::f32),
                                   kiln::Array::view(w1.data(), {kIn, kHidden}, kiln::f32),
                                   kiln::Array::view(b1.data(), {kHidden}, kiln::f32),
                                   kiln::Array::view(w2.data(), {kHidden, kOut}, kiln::f32),
                                   kiln::Array::view(b2.data(), {kOut}, kiln::f32)};
  auto t0 = Clock::now();
  std::vector<kiln::Array> out = model(args);
  auto t1 = Clock::now();
  int64_t result_ns = now_ns();
  double err = demo_max_error(x, batch, w1, b1, w2, b2, out[0].data<float>());
  kiln::Stats s = model.stats();
  // The same model as a second Function: traced and planned again, every kernel from memory. What
  // the first call costs beyond this is kernel compile (cold) or disk load + link + x86 codegen
  // (warm).
  kiln::Function model2 = kiln::jit(
      [](kiln::Tensor x, kiln::Tensor w1, kiln::Tensor b1, kiln::Tensor w2, kiln::Tensor b2) {
        kiln::Tensor h = kiln::gelu(kiln::matmul(x, w1) + b1);
        return kiln::softmax(kiln::matmul(h, w2) + b2, -1);
      });
  auto t2 = Clock::now();
  model2(args);
  auto t3 = Clock::now();
  std::printf(
      "RESULT result_ns %lld first_call_ms %.4f main_to_result_ms %.4f setup_ms %.4f "
      "memhit_call_ms %.4f disk_hits %lld llvm %lld x86 %lld max_err %.3e\n",
      (long long)result_ns, ms_between(t0, t1), ms_between(main_start, t1),
      ms_between(main_start, t0), ms_between(t2, t3), (long long)s.disk_hits,
      (long long)s.backend_kernels["llvm"], (long long)s.backend_kernels["x86"], err);
  return err < 1e-5 ? 0 : 3;
}

// Function i of the per-kernel measurement: one LLVM kernel per function, distinct constants.
kiln::Function make_kernel(int i) {
  double a = i + 1, b = 0.25 * i;
  if (i % 2 == 0) return kiln::jit([a, b](kiln::Tensor x) { return x * a + b; });
  return kiln::jit([a, b](kiln::Tensor x) { return (x * a + b).sum({1}); });
}

// First call of function i, then of an identical function whose kernel is in memory.
int child_kernels(int n) {
  std::vector<float> x(4 * 64);
  for (size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>(j % 32) * 0.5f - 8.0f;
  std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {4, 64}, kiln::f32)};
  // Untimed warm-up (kernel n: first disk load or compile, so ORC and the dispatch paths are up).
  make_kernel(n)(args);
  std::vector<double> first, again;
  int64_t hits = 0, llvm = 0;
  for (int i = 0; i < n; ++i) {
    kiln::Function f = make_kernel(i);
    auto t0 = Clock::now();
    f(args);
    auto t1 = Clock::now();
    kiln::Function g = make_kernel(i);
    g(args);
    auto t2 = Clock::now();
    first.push_back(ms_between(t0, t1));
    again.push_back(ms_between(t1, t2));
    kiln::Stats s = f.stats();
    hits += s.disk_hits;
    llvm += s.backend_kernels["llvm"];
  }
  std::vector<double> diff;
  for (size_t i = 0; i < first.size(); ++i) diff.push_back(first[i] - again[i]);
  std::printf(
      "RESULT n %d disk_hits %lld llvm %lld first_median_ms %.4f memhit_median_ms %.4f "
      "diff_median_ms %.4f diff_mean_ms %.4f diff_p90_ms %.4f\n",
      n, (long long)hits, (long long)llvm, median(first), median(again), median(diff), mean(diff),
      percentile(diff, 0.9));
  return 0;
}

// DiskCache::load and the link, timed per entry of the directory.
int child_load(const std::string& dir) {
  using namespace kiln::cache;
  DiskCacheConfig cfg;
  cfg.dir = dir;
  cfg.mode = kiln::CacheMode::readonly;
  DiskCache cache(cfg);
  if (!cache.enabled()) {
    std::fprintf(stderr, "cache disabled: %s\n", cache.disabled_reason().c_str());
    return 2;
  }
  std::vector<CacheKey> keys;
  for (const EntryInfo& e : cache.list()) {
    auto manifest = cache.read_manifest(e.key_hex);
    std::vector<std::pair<std::string, std::string>> fields;
    if (!manifest || !parse_manifest(*manifest, fields)) return 2;
    KeyBuilder kb;
    for (const auto& [k, v] : fields) kb.add(k, v);
    keys.push_back(kb.finish());
    if (keys.back().hex() != e.key_hex) return 2;
  }
  std::vector<double> read_ms, link_ms, total_ms;
  double first_link_ms = NAN;
  int64_t bytes = 0;
  std::vector<std::unique_ptr<kiln::llvmjit::LoadedObject>> keep;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto t0 = Clock::now();
    auto payload = cache.load(keys[i], PayloadKind::llvm_object);
    auto t1 = Clock::now();
    if (!payload) return 4;
    bytes += static_cast<int64_t>(payload->size());
    auto obj = kiln::llvmjit::load_object(*payload, "k" + std::to_string(i));
    void* fn = obj->lookup("kiln_kernel");
    auto t2 = Clock::now();
    if (!fn) return 5;
    keep.push_back(std::move(obj));
    if (i == 0) {
      first_link_ms = ms_between(t1, t2);  // starts ORC: reported apart
      continue;
    }
    read_ms.push_back(ms_between(t0, t1));
    link_ms.push_back(ms_between(t1, t2));
    total_ms.push_back(ms_between(t0, t2));
  }
  std::printf(
      "RESULT entries %zu mean_bytes %lld read_median_ms %.4f read_p90_ms %.4f "
      "link_median_ms %.4f link_p90_ms %.4f total_median_ms %.4f total_mean_ms %.4f "
      "total_p90_ms %.4f total_max_ms %.4f first_link_ms %.4f\n",
      keys.size(), (long long)(keys.empty() ? 0 : bytes / (int64_t)keys.size()), median(read_ms),
      percentile(read_ms, 0.9), median(link_ms), percentile(link_ms, 0.9), median(total_ms),
      mean(total_ms), percentile(total_ms, 0.9),
      total_ms.empty() ? NAN : *std::max_element(total_ms.begin(), total_ms.end()), first_link_ms);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Parent.

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kiln-cache-bench-XXXXXX";
    if (char* p = mkdtemp(tmpl)) path_ = p;
  }
  ~TempDir() {
    if (path_.empty()) return;
    nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int type, struct FTW*) {
          return type == FTW_DP ? rmdir(p) : unlink(p);
        },
        16, FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ChildResult {
  bool ok = false;
  double spawn_to_exit_ms = 0;
  int64_t spawn_ns = 0;
  std::map<std::string, double> v;
  std::string output;
};

std::string g_self;
std::string g_work;  // a private scratch directory for child logs

ChildResult run_child(const std::vector<std::string>& args, const std::string& cache_dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_", 5) != 0) env.emplace_back(*e);
  env.push_back("KILN_CACHE=on");
  env.push_back("KILN_CACHE_DIR=" + cache_dir);
  env.push_back("KILN_NUM_THREADS=1");
  env.push_back("KILN_LOG=warn");
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_s = {g_self, "--child"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string log = g_work + "/child.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  ChildResult r;
  pid_t pid = -1;
  r.spawn_ns = now_ns();
  auto t0 = Clock::now();
  int rc = posix_spawn(&pid, g_self.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return r;
  int status = 0;
  waitpid(pid, &status, 0);
  r.spawn_to_exit_ms = ms_between(t0, Clock::now());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  size_t at = r.output.find("RESULT ");
  if (at != std::string::npos) {
    std::istringstream line(r.output.substr(at + 7, r.output.find('\n', at) - at - 7));
    std::string k;
    double val;
    while (line >> k >> val) r.v[k] = val;
  } else {
    r.ok = false;
  }
  if (!r.ok) std::fprintf(stderr, "child %s failed:\n%s\n", args[0].c_str(), r.output.c_str());
  return r;
}

struct DemoRuns {
  std::vector<double> first_call, main_to_result, spawn_to_result, spawn_to_exit, disk_hits, llvm,
      x86, max_err, setup, memhit;
  void add(const ChildResult& r) {
    setup.push_back(r.v.at("setup_ms"));
    memhit.push_back(r.v.at("memhit_call_ms"));
    first_call.push_back(r.v.at("first_call_ms"));
    main_to_result.push_back(r.v.at("main_to_result_ms"));
    spawn_to_result.push_back((r.v.at("result_ns") - static_cast<double>(r.spawn_ns)) * 1e-6);
    spawn_to_exit.push_back(r.spawn_to_exit_ms);
    disk_hits.push_back(r.v.at("disk_hits"));
    llvm.push_back(r.v.at("llvm"));
    x86.push_back(r.v.at("x86"));
    max_err.push_back(r.v.at("max_err"));
  }
};

void print_range(const char* what, const std::vector<double>& v) {
  std::printf("  %-28s median %9.3f ms  (min %8.3f, max %8.3f)\n", what, median(v),
              *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
}

int parent(int reps, int64_t batch, int kernels) {
  TempDir work;
  g_work = work.path();
  std::printf(
      "cache_bench: %d repetitions, demo batch %lld, %d kernels for the per-kernel load; "
      "children run with KILN_NUM_THREADS=1\n",
      reps, (long long)batch, kernels);
  std::string b = std::to_string(batch);
  bool ok = true;

  // A process that does nothing: the floor of "spawn to exit" (exec + loading the libraries).
  std::vector<double> noop;
  for (int r = 0; r < reps; ++r) {
    TempDir d;
    ChildResult c = run_child({"noop"}, d.path() + "/cache");
    noop.push_back(c.spawn_to_exit_ms);
  }

  DemoRuns cold, warm;
  for (int r = 0; r < reps; ++r) {
    TempDir d;  // an empty cache per repetition
    ChildResult c = run_child({"demo", b}, d.path() + "/cache");
    if (!c.ok) return 1;
    cold.add(c);
  }
  TempDir warm_dir;
  std::string wdir = warm_dir.path() + "/cache";
  ok = run_child({"demo", b}, wdir).ok && ok;  // fills the cache, untimed
  for (int r = 0; r < reps; ++r) {
    ChildResult c = run_child({"demo", b}, wdir);
    if (!c.ok) return 1;
    warm.add(c);
  }
  std::printf("\nDemo MLP+softmax, batch %lld, time to first result in a new process:\n",
              (long long)batch);
  std::printf(" cold (empty cache): %g disk hits, %g LLVM + %g x86 kernels, max |err| %.2e\n",
              median(cold.disk_hits), median(cold.llvm), median(cold.x86),
              *std::max_element(cold.max_err.begin(), cold.max_err.end()));
  print_range("first call", cold.first_call);
  print_range("  same, kernels from memory", cold.memhit);
  print_range("main() to result", cold.main_to_result);
  print_range("  of which weights setup", cold.setup);
  print_range("spawn to result", cold.spawn_to_result);
  print_range("spawn to exit", cold.spawn_to_exit);
  std::printf(" warm (disk cache): %g disk hits, %g LLVM + %g x86 kernels, max |err| %.2e\n",
              median(warm.disk_hits), median(warm.llvm), median(warm.x86),
              *std::max_element(warm.max_err.begin(), warm.max_err.end()));
  print_range("first call", warm.first_call);
  print_range("  same, kernels from memory", warm.memhit);
  print_range("main() to result", warm.main_to_result);
  print_range("  of which weights setup", warm.setup);
  print_range("spawn to result", warm.spawn_to_result);
  print_range("spawn to exit", warm.spawn_to_exit);
  print_range("no-op process, spawn to exit", noop);
  std::printf(
      " cold/warm ratio of medians: first call %.1fx, main() to result %.1fx, spawn to result "
      "%.1fx, spawn to exit %.1fx (goal >= 20x)\n",
      median(cold.first_call) / median(warm.first_call),
      median(cold.main_to_result) / median(warm.main_to_result),
      median(cold.spawn_to_result) / median(warm.spawn_to_result),
      median(cold.spawn_to_exit) / median(warm.spawn_to_exit));

  // Per-kernel load time.
  TempDir kdir;
  std::string kcache = kdir.path() + "/cache";
  std::string n = std::to_string(kernels);
  ChildResult fill = run_child({"kernels", n}, kcache);  // compiles n+1 kernels, stores them
  if (!fill.ok) return 1;
  std::vector<double> direct_total, direct_read, direct_link, direct_first, direct_p90, jit_diff,
      jit_first, jit_mem, jit_p90;
  double entries = 0, entry_bytes = 0, hits = 0, llvm = 0;
  for (int r = 0; r < reps; ++r) {
    ChildResult d = run_child({"load", kcache}, kcache);
    if (!d.ok) return 1;
    entries = d.v.at("entries");
    entry_bytes = d.v.at("mean_bytes");
    direct_total.push_back(d.v.at("total_median_ms"));
    direct_read.push_back(d.v.at("read_median_ms"));
    direct_link.push_back(d.v.at("link_median_ms"));
    direct_first.push_back(d.v.at("first_link_ms"));
    direct_p90.push_back(d.v.at("total_p90_ms"));
    ChildResult j = run_child({"kernels", n}, kcache);
    if (!j.ok) return 1;
    hits = j.v.at("disk_hits");
    llvm = j.v.at("llvm");
    jit_diff.push_back(j.v.at("diff_median_ms"));
    jit_first.push_back(j.v.at("first_median_ms"));
    jit_mem.push_back(j.v.at("memhit_median_ms"));
    jit_p90.push_back(j.v.at("diff_p90_ms"));
  }
  std::printf(
      "\nLoad time per LLVM kernel on a disk hit (%g entries, %g bytes each on average; "
      "median over %d processes of each process's median):\n",
      entries, entry_bytes, reps);
  std::printf(
      "  direct: DiskCache::load %.3f ms + link %.3f ms = %.3f ms per kernel (p90 %.3f ms); "
      "first link of a process (starts ORC) %.3f ms\n",
      median(direct_read), median(direct_link), median(direct_total), median(direct_p90),
      median(direct_first));
  std::printf(
      "  jit: first call with the kernel from disk %.3f ms - from memory %.3f ms = %.3f ms "
      "per kernel (p90 %.3f ms); %g/%g disk hits\n",
      median(jit_first), median(jit_mem), median(jit_diff), median(jit_p90), hits, llvm);
  // What a miss costs instead: the same measurement with an empty cache.
  std::vector<double> compile_diff;
  for (int r = 0; r < std::min(reps, 3); ++r) {
    TempDir e;
    ChildResult c = run_child({"kernels", n}, e.path() + "/cache");
    if (!c.ok) return 1;
    compile_diff.push_back(c.v.at("diff_median_ms"));
  }
  std::printf("  for comparison, a miss (compile + store) in an empty cache: %.3f ms per kernel\n",
              median(compile_diff));
  std::printf("  goal: <= 1 ms per LLVM object: %s\n",
              median(direct_total) <= 1.0 && median(jit_diff) <= 1.0 ? "met" : "NOT met");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto main_start = Clock::now();
  if (argc >= 3 && std::strcmp(argv[1], "--child") == 0) {
    std::string mode = argv[2];
    if (mode == "noop") {
      std::printf("RESULT noop 1\n");
      return 0;
    }
    if (mode == "demo" && argc >= 4) return child_demo(std::atoll(argv[3]), main_start);
    if (mode == "kernels" && argc >= 4) return child_kernels(std::atoi(argv[3]));
    if (mode == "load" && argc >= 4) return child_load(argv[3]);
    return 2;
  }
  int reps = 5, kernels = 100;
  int64_t batch = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--batch") == 0)
      batch = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--kernels") == 0)
      kernels = std::atoi(argv[i + 1]);
  }
  char buf[4096];
  ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return 1;
  buf[len] = 0;
  g_self = buf;
  return parent(reps, batch, kernels);
}
