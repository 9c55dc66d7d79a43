// The disk cache through the real JIT, in child processes. kiln reads its environment once per
// process (and ctest runs these tests with KILN_CACHE=off), so every JIT-level check runs in a new
// process: this binary re-executes itself (/proc/self/exe) running only the hidden test case
// "cache_jit probe" with a chosen environment (KILN_CACHE_DIR, KILN_CACHE, KILN_ISA) and probe
// instructions (KILN_PROBE_*). The probe compiles and runs N distinct kernels, checks every result
// against its closed form and writes its counts to a file; the assertions run in the parent.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_cache.h"
#include "cache/entry_format.h"
#include "cache/key.h"
#include "cache_test_util.h"
#include "child_process.h"
#include "jit/compile.h"
#include "needs_llvm.h"

extern char** environ;

using namespace kiln::cache;
using namespace kiln::cache::testing;

namespace {

constexpr const char* kProbeTestName = "cache_jit probe";

// ---------------------------------------------------------------------------------------------
// The probe (child side).

constexpr int64_t kRows = 4, kCols = 16;

double input_value(int64_t j) { return static_cast<double>(j % 32) * 0.5 - 8.0; }
// Kernel i: y = x * a_i + b_i, and for odd i summed over the last axis. Every value is a small
// multiple of 1/4, so f32 computes it exactly (with or without FMA) and the check is exact.
double coef_a(int i) { return static_cast<double>(i + 1); }
double coef_b(int i) { return 0.25 * static_cast<double>(i); }

kiln::Function make_kernel(int i) {
  double a = coef_a(i), b = coef_b(i);
  if (i % 2 == 0) return kiln::jit([a, b](kiln::Tensor x) { return x * a + b; });
  return kiln::jit([a, b](kiln::Tensor x) { return (x * a + b).sum({1}); });
}

// Number of wrong values in kernel i's output.
int64_t check_kernel(int i, const kiln::Array& out) {
  int64_t wrong = 0;
  const float* got = out.data<float>();
  if (i % 2 == 0) {
    if (out.shape() != std::vector<int64_t>{kRows, kCols}) return kRows * kCols;
    for (int64_t j = 0; j < kRows * kCols; ++j)
      if (got[j] != static_cast<float>(input_value(j) * coef_a(i) + coef_b(i))) ++wrong;
  } else {
    if (out.shape() != std::vector<int64_t>{kRows}) return kRows;
    for (int64_t r = 0; r < kRows; ++r) {
      double want = 0;
      for (int64_t c = 0; c < kCols; ++c)
        want += input_value(r * kCols + c) * coef_a(i) + coef_b(i);
      if (got[r] != static_cast<float>(want)) ++wrong;
    }
  }
  return wrong;
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

}  // namespace

// Run only by cache_jit_test's parent processes (hidden: "[.]"). Without KILN_PROBE_OUT it does
// nothing.
TEST_CASE("cache_jit probe", "[.probe]") {
  const char* out_path = std::getenv("KILN_PROBE_OUT");
  if (!out_path) return;
  if (const char* field = std::getenv("KILN_PROBE_OVERRIDE_FIELD")) {
    const char* value = std::getenv("KILN_PROBE_OVERRIDE_VALUE");
    kiln::override_key_field_for_testing(field, value ? value : "");
  }
  const int n = static_cast<int>(env_int("KILN_PROBE_KERNELS", 10));
  const int64_t seed = env_int("KILN_PROBE_SEED", 0);
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (seed != 0)
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(seed)));

  std::vector<float> x(kRows * kCols);
  for (int64_t j = 0; j < kRows * kCols; ++j) x[j] = static_cast<float>(input_value(j));
  std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {kRows, kCols}, kiln::f32)};
  // Start line: wait (at most 60 s) until the parent creates this file, so racing probes start
  // together, past their process start-up.
  if (const char* go = std::getenv("KILN_PROBE_GO")) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!file_exists(go) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  std::map<std::string, int64_t> r;
  std::string first_error;
  auto t0 = std::chrono::steady_clock::now();
  for (int i : order) {
    try {
      kiln::Function f = make_kernel(i);
      for (int call = 0; call < 2; ++call) {  // the second call is served from memory
        std::vector<kiln::Array> out = f(args);
        r["wrong"] += out.size() == 1 ? check_kernel(i, out[0]) : 1;
      }
      kiln::Stats s = f.stats();
      r["compiles"] += s.compiles;
      r["disk_hits"] += s.disk_hits;
      r["memory_hits"] += s.memory_hits;
      r["kernel_memory_hits"] += s.kernel_memory_hits;
      for (const auto& [backend, count] : s.backend_kernels) r["kernels_" + backend] += count;
    } catch (const std::exception& e) {
      r["errors"] += 1;
      if (first_error.empty()) first_error = e.what();
    }
  }
  r["elapsed_us"] =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  DiskCache& disk = DiskCache::global();
  r["disk_enabled"] = disk.enabled();
  DiskCacheStats ds = disk.stats();
  r["dc_hits"] = ds.hits;
  r["dc_misses"] = ds.misses;
  r["dc_stores"] = ds.stores;
  r["dc_store_failures"] = ds.store_failures;
  r["dc_bad_removed"] = ds.bad_entries_removed;
  r["done"] = 1;

  std::string tmp = std::string(out_path) + ".tmp";
  {
    std::ofstream o(tmp);
    for (const auto& [k, v] : r) o << k << ' ' << v << '\n';
    if (!first_error.empty()) o << "first_error_text " << 0 << ' ' << first_error << '\n';
  }
  std::rename(tmp.c_str(), out_path);
}

// ---------------------------------------------------------------------------------------------
// The parent side.

namespace {

struct ProbeEnv {
  std::string cache_dir;
  std::string cache_mode = "on";  // KILN_CACHE
  std::string isa;                // KILN_ISA; empty: unset
  int kernels = 10;
  int64_t seed = 0;
  std::string override_field, override_value;
  std::string go_file;  // when set, the probe waits for this file before it starts
};

struct ProbeRun {
  pid_t pid = -1;
  std::string out_path, log_path;
};

struct ProbeResult {
  bool exited_ok = false;
  std::string status;  // how the child ended
  std::map<std::string, int64_t> v;
  std::string log;
  int64_t operator[](const std::string& k) const {
    auto it = v.find(k);
    return it == v.end() ? 0 : it->second;
  }
  int64_t llvm() const { return (*this)["kernels_llvm"]; }
};

// Starts the probe in a new process. Its stdout and stderr go to a log file next to its result.
ProbeRun start_probe(const ProbeEnv& pe, const std::string& work_dir, const std::string& tag) {
  ProbeRun run;
  run.out_path = work_dir + "/probe-" + tag + ".out";
  run.log_path = work_dir + "/probe-" + tag + ".log";
  std::vector<std::string> env = kiln_test::environment_without_kiln();
  env.push_back("KILN_CACHE_DIR=" + pe.cache_dir);
  env.push_back("KILN_CACHE=" + pe.cache_mode);
  env.push_back("KILN_NUM_THREADS=1");  // up to 8 probes share the cores
  env.push_back("KILN_LOG=warn");
  if (!pe.isa.empty()) env.push_back("KILN_ISA=" + pe.isa);
  env.push_back("KILN_PROBE_OUT=" + run.out_path);
  env.push_back("KILN_PROBE_KERNELS=" + std::to_string(pe.kernels));
  env.push_back("KILN_PROBE_SEED=" + std::to_string(pe.seed));
  if (!pe.go_file.empty()) env.push_back("KILN_PROBE_GO=" + pe.go_file);
  if (!pe.override_field.empty()) {
    env.push_back("KILN_PROBE_OVERRIDE_FIELD=" + pe.override_field);
    env.push_back("KILN_PROBE_OVERRIDE_VALUE=" + pe.override_value);
  }
  run.pid = kiln_test::spawn_self(kProbeTestName, std::move(env), run.log_path);
  REQUIRE(run.pid > 0);
  return run;
}

using kiln_test::slurp;

// Waits (at most `timeout`; then SIGKILL) and reads the result.
ProbeResult finish_probe(const ProbeRun& run,
                         std::chrono::seconds timeout = std::chrono::seconds(180)) {
  ProbeResult res;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(run.pid, &status, WNOHANG);
    if (w == run.pid) break;
    if (w < 0) {
      res.status = "waitpid failed";
      return res;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(run.pid, SIGKILL);
      waitpid(run.pid, &status, 0);
      res.status = "timed out (killed)";
      res.log = slurp(run.log_path);
      return res;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) {
    res.status = "exit " + std::to_string(WEXITSTATUS(status));
    res.exited_ok = WEXITSTATUS(status) == 0;
  } else if (WIFSIGNALED(status)) {
    res.status = "signal " + std::to_string(WTERMSIG(status));
  }
  std::ifstream in(run.out_path);
  std::string k;
  int64_t v;
  while (in >> k >> v) {
    if (k == "first_error_text") {
      std::string rest;
      std::getline(in, rest);
      res.log += "first error:" + rest + "\n";
      continue;
    }
    res.v[k] = v;
  }
  res.log += slurp(run.log_path);
  if (res["done"] != 1) res.exited_ok = false;
  return res;
}

ProbeResult run_probe(const ProbeEnv& pe, const std::string& work_dir, const std::string& tag) {
  return finish_probe(start_probe(pe, work_dir, tag));
}

std::string describe(const ProbeResult& r) {
  std::ostringstream s;
  s << r.status << ":";
  for (const auto& [k, v] : r.v) s << ' ' << k << '=' << v;
  std::string log = r.log.size() > 3000 ? r.log.substr(r.log.size() - 3000) : r.log;
  s << "\n--- probe output ---\n" << log;
  return s.str();
}

// A probe that ran cleanly, computed every value right and counted its kernels.
void check_clean(const ProbeResult& r, int kernels) {
  INFO(describe(r));
  REQUIRE(r.exited_ok);
  CHECK(r["errors"] == 0);
  CHECK(r["wrong"] == 0);
  CHECK(r["disk_enabled"] == 1);
  CHECK(r.llvm() >= kernels);          // at least one LLVM kernel per function
  CHECK(r["kernels_x86"] == 0);        // no GEMM here: every kernel is an LLVM object on disk
  CHECK(r["memory_hits"] == kernels);  // each function's second call
  CHECK(r["dc_store_failures"] == 0);
}

int64_t entry_count(const std::string& dir) {
  DiskCache cache(make_config(dir));
  return static_cast<int64_t>(cache.list().size());
}

// The real value of each key field, read back from an entry the JIT wrote.
std::map<std::string, std::string> real_fields(const std::string& dir) {
  DiskCache cache(make_config(dir));
  auto entries = cache.list();
  REQUIRE(!entries.empty());
  auto manifest = cache.read_manifest(entries.front().key_hex);
  REQUIRE(manifest);
  std::vector<std::pair<std::string, std::string>> fields;
  REQUIRE(parse_manifest(*manifest, fields));
  std::map<std::string, std::string> out(fields.begin(), fields.end());
  for (const char* f : {"kiln", "kiln_build", "backend", "device", "options", "group"})
    REQUIRE(out.count(f) == 1);
  return out;
}

// Replaces the token after `prefix` (up to the next space) with `value`; "" if prefix is absent.
std::string replace_token(const std::string& s, const std::string& prefix,
                          const std::string& value) {
  size_t at = s.find(prefix);
  if (at == std::string::npos) return {};
  size_t from = at + prefix.size();
  size_t to = s.find(' ', from);
  if (to == std::string::npos) to = s.size();
  return s.substr(0, from) + value + s.substr(to);
}

std::string bump_version(const std::string& v) {  // "0.1.0" -> "0.1.1"
  size_t dot = v.rfind('.');
  std::string last = dot == std::string::npos ? v : v.substr(dot + 1);
  std::string head = dot == std::string::npos ? "" : v.substr(0, dot + 1);
  char* end = nullptr;
  long n = std::strtol(last.c_str(), &end, 10);
  if (last.empty() || *end) return v + ".1";
  return head + std::to_string(n + 1);
}

}  // namespace

TEST_CASE("JIT kernels round-trip through the disk cache in new processes",
          "[cache][jit]" KILN_NEEDS_LLVM) {
  constexpr int kKernels = 12;
  TempDir tmp;
  REQUIRE(!tmp.path().empty());
  ProbeEnv pe;
  pe.cache_dir = tmp.sub("cache");
  pe.kernels = kKernels;

  ProbeResult cold = run_probe(pe, tmp.path(), "cold");
  check_clean(cold, kKernels);
  CHECK(cold["disk_hits"] == 0);
  CHECK(cold["compiles"] == kKernels);
  CHECK(cold["dc_stores"] == cold.llvm());
  CHECK(entry_count(pe.cache_dir) == cold.llvm());

  ProbeResult warm = run_probe(pe, tmp.path(), "warm");
  check_clean(warm, kKernels);
  CHECK(warm.llvm() == cold.llvm());
  CHECK(warm["disk_hits"] == warm.llvm());  // every kernel loaded from disk
  CHECK(warm["dc_stores"] == 0);

  pe.cache_mode = "readonly";
  ProbeResult ro = run_probe(pe, tmp.path(), "readonly");
  check_clean(ro, kKernels);
  CHECK(ro["disk_hits"] == ro.llvm());
  CHECK(ro["dc_stores"] == 0);

  pe.cache_mode = "off";
  ProbeResult off = run_probe(pe, tmp.path(), "off");
  INFO(describe(off));
  REQUIRE(off.exited_ok);
  CHECK(off["wrong"] == 0);
  CHECK(off["disk_hits"] == 0);
  CHECK(off["disk_enabled"] == 0);
  CHECK(entry_count(pe.cache_dir) == cold.llvm());

  WARN("JIT round trip, " << kKernels << " functions / " << cold.llvm() << " LLVM kernels: cold "
                          << cold["disk_hits"] << " disk hits in " << cold["elapsed_us"] / 1000
                          << " ms; warm " << warm["disk_hits"] << " in "
                          << warm["elapsed_us"] / 1000 << " ms; readonly " << ro["disk_hits"]
                          << "; off " << off["disk_hits"]);
}

TEST_CASE("changing any key component is a miss, an unchanged key is a hit",
          "[cache][jit][key]" KILN_NEEDS_LLVM) {
  constexpr int kKernels = 8;
  TempDir tmp;
  REQUIRE(!tmp.path().empty());
  ProbeEnv base;
  base.cache_dir = tmp.sub("cache");
  base.kernels = kKernels;
  ProbeResult first = run_probe(base, tmp.path(), "base");
  check_clean(first, kKernels);
  REQUIRE(first["disk_hits"] == 0);
  const int64_t n = first.llvm();

  // The values the JIT really put in its keys, and one changed component at a time.
  auto real = real_fields(base.cache_dir);
  struct Change {
    std::string what, field, value;
  };
  std::vector<Change> changes;
  changes.push_back({"kiln version " + real["kiln"] + " -> " + bump_version(real["kiln"]), "kiln",
                     bump_version(real["kiln"])});
  // A rebuilt kiln (same version number, other code) must not load this build's kernels.
  changes.push_back({"kiln build " + real["kiln_build"] + " -> another build", "kiln_build",
                     "0123456789abcdef0123456789abcdef01234567"});
  {
    std::string v = replace_token(real["backend"], "llvm ", "18.1.8");
    REQUIRE(!v.empty());
    changes.push_back({"LLVM version -> 18.1.8", "backend", v});
  }
  {
    // Target features: flip the sign of the first feature in the list.
    std::string b = real["backend"];
    size_t at = b.find("features=");
    REQUIRE(at != std::string::npos);
    size_t sign = b.find_first_of("+-", at);
    REQUIRE(sign != std::string::npos);
    b[sign] = b[sign] == '+' ? '-' : '+';
    changes.push_back({"LLVM target features (one flipped)", "backend", b});
    std::string cpu = replace_token(real["backend"], "cpu=", "x86-64-v2");
    REQUIRE(!cpu.empty());
    changes.push_back({"LLVM target cpu -> x86-64-v2", "backend", cpu});
  }
  {
    std::string d = real["device"];
    size_t at = d.find("features=");
    REQUIRE(at != std::string::npos);
    unsigned long long bits = std::strtoull(d.c_str() + at + 9, nullptr, 10);
    changes.push_back({"CPU feature bits (bit 0 flipped)", "device",
                       replace_token(d, "features=", std::to_string(bits ^ 1ull))});
    std::string l2 = replace_token(d, "l2=", "1048576000");
    REQUIRE(!l2.empty());
    changes.push_back({"CPU cache sizes (L2)", "device", l2});
  }
  changes.push_back({"options " + real["options"] + " -> abi=2", "options", "abi=2"});

  std::ostringstream table;
  for (size_t c = 0; c < changes.size(); ++c) {
    const Change& ch = changes[c];
    INFO(ch.what);
    ProbeEnv pe = base;
    pe.override_field = ch.field;
    pe.override_value = ch.value;
    ProbeResult changed = run_probe(pe, tmp.path(), "changed" + std::to_string(c));
    check_clean(changed, kKernels);
    CHECK(changed.llvm() == n);
    CHECK(changed["disk_hits"] == 0);  // a miss for every kernel
    ProbeResult again = run_probe(base, tmp.path(), "unchanged" + std::to_string(c));
    check_clean(again, kKernels);
    CHECK(again["disk_hits"] == n);  // the unchanged key still hits, 100%
    table << "\n  " << ch.what << ": changed " << changed["disk_hits"] << "/" << n
          << " disk hits; unchanged " << again["disk_hits"] << "/" << n;
  }
  // Overriding a field with its own value changes nothing (the override hook itself is neutral).
  for (const char* f : {"kiln", "kiln_build", "backend", "device", "options"}) {
    INFO("same-value override of " << f);
    ProbeEnv pe = base;
    pe.override_field = f;
    pe.override_value = real[f];
    ProbeResult same = run_probe(pe, tmp.path(), std::string("same-") + f);
    check_clean(same, kKernels);
    CHECK(same["disk_hits"] == n);
    table << "\n  " << f << " overridden with its own value: " << same["disk_hits"] << "/" << n
          << " disk hits";
  }
  WARN("key components, " << n << " LLVM kernels per process:" << table.str());
}

TEST_CASE("the KILN_ISA cap is part of the key", "[cache][jit][key]" KILN_NEEDS_LLVM) {
  if (!__builtin_cpu_supports("avx512f")) {
    WARN("skipped: this CPU has no AVX-512, so KILN_ISA=avx2 changes no code here");
    return;
  }
  constexpr int kKernels = 8;
  TempDir tmp;
  REQUIRE(!tmp.path().empty());
  ProbeEnv pe;
  pe.cache_dir = tmp.sub("cache");
  pe.kernels = kKernels;
  ProbeResult uncapped = run_probe(pe, tmp.path(), "uncapped");
  check_clean(uncapped, kKernels);
  const int64_t n = uncapped.llvm();
  CHECK(uncapped["disk_hits"] == 0);

  pe.isa = "avx2";
  ProbeResult capped = run_probe(pe, tmp.path(), "avx2");
  check_clean(capped, kKernels);
  CHECK(capped.llvm() == n);
  CHECK(capped["disk_hits"] == 0);  // AVX2-capped code never comes from AVX-512 entries
  CHECK(entry_count(pe.cache_dir) == 2 * n);
  ProbeResult capped2 = run_probe(pe, tmp.path(), "avx2-again");
  check_clean(capped2, kKernels);
  CHECK(capped2["disk_hits"] == n);

  pe.isa.clear();
  ProbeResult again = run_probe(pe, tmp.path(), "uncapped-again");
  check_clean(again, kKernels);
  CHECK(again["disk_hits"] == n);
  WARN("ISA cap, " << n << " LLVM kernels: uncapped then KILN_ISA=avx2 " << capped["disk_hits"]
                   << "/" << n << " disk hits; avx2 again " << capped2["disk_hits"] << "/" << n
                   << "; uncapped again " << again["disk_hits"] << "/" << n);
}

TEST_CASE("8 processes compile and run the same 100 kernels into one cache, 5 rounds",
          "[cache][jit][stress]" KILN_NEEDS_LLVM) {
  constexpr int kProcs = 8, kKernels = 100, kRounds = 5;
  TempDir tmp;
  REQUIRE(!tmp.path().empty());
  std::string dir = tmp.sub("cache");
  int64_t wrong = 0, errors = 0, store_failures = 0, bad_removed = 0;
  int64_t llvm_per_process = -1;
  std::ostringstream table;
  int64_t last_hits = 0, last_llvm = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<ProbeRun> runs;
    std::string go = tmp.path() + "/go" + std::to_string(round);
    for (int p = 0; p < kProcs; ++p) {
      ProbeEnv pe;
      pe.cache_dir = dir;
      pe.kernels = kKernels;
      // Half the processes take the kernels in one shared order (they compile and publish the same
      // key at the same moment), the other half each in an order of its own.
      pe.seed = p < kProcs / 2 ? 1 + round : 1000 + round * kProcs + p;
      pe.go_file = go;
      runs.push_back(
          start_probe(pe, tmp.path(), "r" + std::to_string(round) + "p" + std::to_string(p)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them load; then all start
    write_file(go, {});
    auto t0 = std::chrono::steady_clock::now();
    int64_t hits = 0, llvm = 0, compiled = 0;
    for (const ProbeRun& run : runs) {
      ProbeResult r = finish_probe(run, std::chrono::seconds(300));
      INFO("round " << round << ": " << describe(r));
      REQUIRE(r.exited_ok);
      CHECK(r["kernels_x86"] == 0);
      if (llvm_per_process < 0) llvm_per_process = r.llvm();
      CHECK(r.llvm() == llvm_per_process);
      CHECK(r.llvm() >= kKernels);
      wrong += r["wrong"];
      errors += r["errors"];
      store_failures += r["dc_store_failures"];
      bad_removed += r["dc_bad_removed"];
      hits += r["disk_hits"];
      llvm += r.llvm();
      compiled += r.llvm() - r["disk_hits"];
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    table << "\n  round " << round + 1 << ": " << hits << "/" << llvm << " disk hits, " << compiled
          << " kernels compiled, " << secs << " s from the start line to the last exit";
    last_hits = hits;
    last_llvm = llvm;
  }
  CHECK(wrong == 0);
  CHECK(errors == 0);
  CHECK(store_failures == 0);
  CHECK(bad_removed == 0);
  CHECK(last_hits == last_llvm);  // the final round: 100% disk hits

  DiskCache cache(make_config(dir));
  VerifyResult v = cache.verify();
  CHECK(v.bad.empty());
  CHECK(v.checked == llvm_per_process);  // one entry per distinct kernel
  CHECK(v.ok == v.checked);
  CHECK(cache.stats().temp_files == 0);
  WARN(kProcs << " processes x " << kKernels << " functions (" << llvm_per_process
              << " LLVM kernels each) x " << kRounds << " rounds:" << table.str() << "\n  " << wrong
              << " wrong results, " << errors << " errors, verify: " << v.checked << " checked, "
              << v.bad.size() << " corrupt");
}

namespace {

// Reads an entry, lets `edit` change its bytes, writes it back in place.
template <typename Edit>
void edit_entry(const std::string& path, Edit&& edit) {
  std::vector<uint8_t> bytes = read_file(path);
  REQUIRE(bytes.size() > kEntryOverheadBytes);
  edit(bytes);
  write_file(path, bytes);
}

}  // namespace

TEST_CASE("a corrupted LLVM object entry is recompiled with the right result and no error",
          "[cache][jit][corrupt]" KILN_NEEDS_LLVM) {
  constexpr int kKernels = 6;
  TempDir tmp;
  REQUIRE(!tmp.path().empty());
  ProbeEnv pe;
  pe.cache_dir = tmp.sub("cache");
  pe.kernels = kKernels;
  ProbeResult cold = run_probe(pe, tmp.path(), "cold");
  check_clean(cold, kKernels);
  const int64_t n = cold.llvm();

  DiskCache view(make_config(pe.cache_dir));
  auto entries = view.list();
  REQUIRE(static_cast<int64_t>(entries.size()) == n);
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.key_hex < b.key_hex; });
  const std::string victim = entries.front().path;
  {
    std::vector<uint8_t> bytes = read_file(victim);
    EntryView ev;
    REQUIRE(parse_entry(bytes, ev) == ParseStatus::ok);
    REQUIRE(ev.kind == PayloadKind::llvm_object);
    REQUIRE(ev.payload.size() > 4);
    REQUIRE(std::memcmp(ev.payload.data(),
                        "\x7f"
                        "ELF",
                        4) == 0);  // a real ELF object
  }

  SECTION("a flipped byte in the object (checksum mismatch)") {
    edit_entry(victim, [](std::vector<uint8_t>& b) {
      EntryHeader h;
      REQUIRE(parse_entry_header(b, h) == ParseStatus::ok);
      size_t at = kEntryHeaderBytes + h.manifest_size + h.payload_size / 2;
      REQUIRE(at < b.size() - kEntryChecksumBytes);
      b[at] ^= 0x40;
    });
    ProbeResult r = run_probe(pe, tmp.path(), "flipped");
    check_clean(r, kKernels);
    CHECK(r["disk_hits"] == n - 1);  // the corrupt one was recompiled
    CHECK(r["dc_bad_removed"] == 1);
    CHECK(r["dc_stores"] == 1);  // and published again
    ProbeResult after = run_probe(pe, tmp.path(), "after-flip");
    check_clean(after, kKernels);
    CHECK(after["disk_hits"] == n);
    WARN("flipped byte in 1 of " << n << " entries: next process " << r["disk_hits"]
                                 << " disk hits, " << r["dc_bad_removed"] << " bad entry removed, "
                                 << r["wrong"] << " wrong, " << r["errors"] << " errors; then "
                                 << after["disk_hits"] << "/" << n << " hits");
  }

  SECTION("a well-formed entry whose object does not link") {
    // The checksum is right (as if written by a broken toolchain): the link fails and the kernel is
    // recompiled.
    edit_entry(victim, [](std::vector<uint8_t>& b) {
      EntryView ev;
      REQUIRE(parse_entry(b, ev) == ParseStatus::ok);
      std::string manifest(ev.manifest);
      std::vector<uint8_t> garbage(ev.payload.begin(), ev.payload.begin() + ev.payload.size() / 3);
      for (size_t i = 64; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131);
      b = encode_entry(PayloadKind::llvm_object, manifest, garbage);
    });
    ProbeResult r = run_probe(pe, tmp.path(), "garbage");
    check_clean(r, kKernels);
    CHECK(r["disk_hits"] == n - 1);
    ProbeResult after = run_probe(pe, tmp.path(), "after-garbage");
    check_clean(after, kKernels);
    CHECK(after["disk_hits"] == n);  // the recompiled object replaced the bad one
    WARN("valid entry with an unlinkable object: next process "
         << r["disk_hits"] << "/" << n << " disk hits, " << r["wrong"] << " wrong, " << r["errors"]
         << " errors; then " << after["disk_hits"] << "/" << n);
  }
}
