// The disk cache through the real JIT, in child processes. kiln reads its environment once per
// process (and ctest runs these tests with KILN_CACHE=off), so every JIT-level check runs in a new
// process: the test binary re-executes itself (/proc/self/exe) running only the hidden test case
// "cache_jit probe" (cache_jit_probe.cpp) with a chosen environment (KILN_CACHE_DIR, KILN_CACHE,
// KILN_ISA) and probe instructions (KILN_PROBE_*). The probe compiles and runs N distinct kernels,
// checks every result against its closed form and writes its counts to a file; the assertions run
// in the parent (cache_jit_test.cpp, cache_jit_stress_test.cpp) with the helpers declared here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "cache_test_util.h"

namespace kiln::cache::testing {

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

// The environment of a probe of `kernels` kernels on a new cache in `tmp` (which must exist).
ProbeEnv probe_env(const TempDir& tmp, int kernels);

// Starts the probe in a new process. Its stdout and stderr go to a log file next to its result.
ProbeRun start_probe(const ProbeEnv& pe, const std::string& work_dir, const std::string& tag);
// Waits (at most `timeout`; then SIGKILL) and reads the result.
ProbeResult finish_probe(const ProbeRun& run,
                         std::chrono::seconds timeout = std::chrono::seconds(180));
ProbeResult run_probe(const ProbeEnv& pe, const std::string& work_dir, const std::string& tag);
// The result's status, counts and the end of the probe's output, for INFO.
std::string describe(const ProbeResult& r);
// A probe that ran cleanly, computed every value right and counted its kernels.
void check_clean(const ProbeResult& r, int kernels);
// Entries in the cache at `dir`.
int64_t entry_count(const std::string& dir);
// The real value of each key field, read back from an entry the JIT wrote.
std::map<std::string, std::string> real_fields(const std::string& dir);

}  // namespace kiln::cache::testing
