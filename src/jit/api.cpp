// Module-level functions of the public API: doctor report, threads, cache directory.
#include "cache/memory_cache.h"
#include "jit/device.h"
#include "jit/thread_pool.h"

#include <kiln/errors.h>
#include <kiln/kiln.h>

#include <sstream>

namespace kiln {

std::string doctor_report() {
  const CpuInfo& c = cpu_info();
  const GlobalOptions& o = global_options();
  std::ostringstream s;
  s << "kiln " << KILN_VERSION << "\n";
  s << "cpu: " << c.brand << " (" << c.vendor << "), " << c.cores << " cores\n";
  s << "cpu features: " << c.feature_names(false) << "\n";
  s << "usable features (KILN_ISA cap applied): " << c.feature_names(true) << "\n";
  s << "vector isa: " << c.isa() << "\n";
  s << "caches: L1d " << (c.l1d_bytes >> 10) << " KiB, L2 " << (c.l2_bytes >> 10) << " KiB, L3 "
    << (c.l3_bytes >> 10) << " KiB\n";
  s << "threads: " << ThreadPool::global().num_threads() << "\n";
  s << "cache dir: " << (o.cache_dir.empty() ? "(none: no HOME)" : o.cache_dir) << " (KILN_CACHE="
    << (o.cache == CacheMode::on ? "on" : o.cache == CacheMode::off ? "off" : "readonly") << ")\n";
#ifdef KILN_WITH_LLVM
  s << "llvm: " << KILN_LLVM_VERSION << "\n";
#else
  s << "llvm: not built\n";
#endif
#ifdef KILN_WITH_ASMJIT
  s << "asmjit: built\n";
#else
  s << "asmjit: not built\n";
#endif
  return s.str();
}

void set_num_threads(int n) {
  if (n < 1) throw Error("set_num_threads: expected n >= 1, got " + std::to_string(n));
  ThreadPool::global().set_num_threads(n);
}

std::string cache_dir() { return global_options().cache_dir; }

void clear_cache() { cache::MemoryCache::global().clear(); }

}  // namespace kiln
