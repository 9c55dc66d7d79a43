// Reads the KILN_* environment once into GlobalOptions. Nothing else in kiln reads the environment.
#include <kiln/errors.h>
#include <kiln/options.h>

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace kiln {

namespace {

// The cores this process may run on (its CPU affinity: taskset, a cpuset), not the machine's:
// a pool with more threads than that leaves workers waiting for a core.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

void warn_bad(const char* name, const std::string& value, const char* expected) {
  std::fprintf(stderr, "kiln warning: ignoring %s=%s (expected %s)\n", name, value.c_str(),
               expected);
}

}  // namespace

GlobalOptions GlobalOptions::from_environment() {
  GlobalOptions o;
  if (auto dir = env("KILN_CACHE_DIR"); !dir.empty()) {
    o.cache_dir = dir;
  } else if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    o.cache_dir = xdg + "/kiln";
  } else if (auto home = env("HOME"); !home.empty()) {
    o.cache_dir = home + "/.cache/kiln";
  }
  if (auto c = env("KILN_CACHE"); !c.empty()) {
    if (c == "on")
      o.cache = CacheMode::on;
    else if (c == "off")
      o.cache = CacheMode::off;
    else if (c == "readonly")
      o.cache = CacheMode::readonly;
    else
      warn_bad("KILN_CACHE", c, "on, off or readonly");
  }
  o.dump_dir = env("KILN_DUMP");
  if (auto l = env("KILN_LOG"); !l.empty()) {
    if (l == "error")
      o.log = LogLevel::error;
    else if (l == "warn" || l == "warning")
      o.log = LogLevel::warn;
    else if (l == "info")
      o.log = LogLevel::info;
    else if (l == "debug")
      o.log = LogLevel::debug;
    else
      warn_bad("KILN_LOG", l, "error, warn, info or debug");
  }
  if (auto n = env("KILN_NUM_THREADS"); !n.empty()) {
    char* end = nullptr;
    long v = std::strtol(n.c_str(), &end, 10);
    if (end && *end == 0 && v > 0 && v <= 1024)
      o.num_threads = static_cast<int>(v);
    else
      warn_bad("KILN_NUM_THREADS", n, "a positive integer");
  }
  if (o.num_threads <= 0) o.num_threads = usable_cores();
  if (auto isa = env("KILN_ISA"); !isa.empty()) {
    if (isa == "avx2")
      o.isa = IsaCap::avx2;
    else if (isa == "avx512")
      o.isa = IsaCap::avx512;
    else if (isa == "amx")
      o.isa = IsaCap::amx;
    else
      warn_bad("KILN_ISA", isa, "avx2, avx512 or amx");
  }
  if (auto m = env("KILN_CACHE_MAX_BYTES"); !m.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(m.c_str(), &end, 10);
    if (end && *end == 0 && v > 0)
      o.cache_max_bytes = v;
    else
      warn_bad("KILN_CACHE_MAX_BYTES", m, "a positive integer");
  }
  return o;
}

const GlobalOptions& global_options() {
  static const GlobalOptions options = GlobalOptions::from_environment();
  return options;
}

}  // namespace kiln
