// Options: everything that configures kiln, read once from the environment and passed down.
// Per-function options mirror the Python decorator's keywords.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

enum class CacheMode : uint8_t { on, off, readonly };
enum class LogLevel : uint8_t { error, warn, info, debug };
enum class IsaCap : uint8_t { none, avx2, avx512, amx };  // none: whatever the CPU has
enum class DynamicMode : uint8_t { automatic, exact, symbolic, per_arg };

// Process-wide settings, from the environment (KILN_*).
struct GlobalOptions {
  std::string cache_dir;  // resolved KILN_CACHE_DIR / XDG_CACHE_HOME / HOME
  CacheMode cache = CacheMode::on;
  std::string dump_dir;  // KILN_DUMP; empty: no dumps
  LogLevel log = LogLevel::warn;
  int num_threads = 0;  // KILN_NUM_THREADS; 0: the cores this process may run on (its affinity)
  IsaCap isa = IsaCap::none;
  int64_t cache_max_bytes = int64_t{1} << 30;

  static GlobalOptions from_environment();
};

// The process-wide options (read from the environment on first use).
const GlobalOptions& global_options();

// Per-function options (the Python decorator's keywords).
struct Options {
  DynamicMode dynamic = DynamicMode::automatic;
  std::map<int, std::vector<int>> dynamic_dims;  // for per_arg: arg index -> dims
  std::string device = "cpu";
  std::vector<int> static_argnums;
  bool cache = true;  // false: bypass the disk cache
  int max_variants = 8;
};

}  // namespace kiln
