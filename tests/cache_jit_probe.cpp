// The probe of cache_jit_probe.h (the child side: a hidden test case this binary runs in a new
// process) and the parent's helpers that start it and read its result.
#include "cache_jit_probe.h"

#include <signal.h>
#include <sys/wait.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
#include "cache_test_util.h"
#include "child_process.h"
#include "jit/compile.h"

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

// Run only by the cache_jit tests' parent processes (hidden: "[.]"). Without KILN_PROBE_OUT it does
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

namespace kiln::cache::testing {

ProbeEnv probe_env(const TempDir& tmp, int kernels) {
  REQUIRE(!tmp.path().empty());
  ProbeEnv pe;
  pe.cache_dir = tmp.sub("cache");
  pe.kernels = kernels;
  return pe;
}

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

// Waits (at most `timeout`; then SIGKILL) and reads the result.
ProbeResult finish_probe(const ProbeRun& run, std::chrono::seconds timeout) {
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
      res.log = kiln_test::slurp(run.log_path);
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
  res.log += kiln_test::slurp(run.log_path);
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

}  // namespace kiln::cache::testing
