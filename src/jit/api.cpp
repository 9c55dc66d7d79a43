// Module-level functions of the public API: doctor report, threads, cache directory.
#include "cache/memory_cache.h"
#include "jit/device.h"
#include "jit/thread_pool.h"
#include "support/build_id.h"

#include <kiln/errors.h>
#include <kiln/kiln.h>

#include <dlfcn.h>

#include <sstream>

namespace kiln {

namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// GPUs are reached only through the CUDA driver loaded at run time; without it there are none.
std::string probe_gpus(std::vector<GpuInfo>& gpus) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return "no CUDA driver (libcuda.so.1 not found)";
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  using AttrFn = int (*)(int*, int, int);
  using MemFn = int (*)(size_t*, int);
  auto init = reinterpret_cast<InitFn>(dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(h, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(h, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(dlsym(h, "cuDeviceGetName"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(h, "cuDeviceGetAttribute"));
  auto mem = reinterpret_cast<MemFn>(dlsym(h, "cuDeviceTotalMem_v2"));
  if (!init || !count || !get || !name || !attr || !mem)
    return "the CUDA driver lacks expected symbols";
  if (init(0) != 0) return "cuInit failed (no usable GPU)";
  int n = 0;
  if (count(&n) != 0) return "cuDeviceGetCount failed";
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) continue;
    GpuInfo g;
    char buf[256] = {};
    if (name(buf, sizeof buf, dev) == 0) g.name = buf;
    attr(&g.compute_major, 75, dev);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    attr(&g.compute_minor, 76, dev);  // ..._MINOR
    size_t bytes = 0;
    if (mem(&bytes, dev) == 0) g.memory_bytes = static_cast<int64_t>(bytes);
    gpus.push_back(g);
  }
  return n == 0 ? "the CUDA driver reports no GPUs" : "";
}

}  // namespace

DeviceInfo device_info() {
  const CpuInfo& c = cpu_info();
  DeviceInfo d;
  d.cpu_features = split_words(c.feature_names(true));
  d.cpu_features_hardware = split_words(c.feature_names(false));
  d.isa = c.isa();
  d.cpu_brand = c.brand;
  d.num_cores = c.cores;
  d.num_threads = ThreadPool::global().num_threads();
  d.l1d_bytes = c.l1d_bytes;
  d.l2_bytes = c.l2_bytes;
  d.l3_bytes = c.l3_bytes;
  d.gpu_status = probe_gpus(d.gpus);
#ifdef KILN_WITH_LLVM
  d.llvm_version = KILN_LLVM_VERSION;
#endif
  return d;
}

std::string doctor_report() {
  const CpuInfo& c = cpu_info();
  const GlobalOptions& o = global_options();
  std::ostringstream s;
  s << "kiln " << KILN_VERSION << " (build " << build_id() << ")\n";
  s << "cpu: " << c.brand << " (" << c.vendor << "), " << c.cores << " cores\n";
  s << "cpu features: " << c.feature_names(false) << "\n";
  s << "usable features (KILN_ISA cap applied): " << c.feature_names(true) << "\n";
  s << "vector isa: " << c.isa() << "\n";
  s << "caches: L1d " << (c.l1d_bytes >> 10) << " KiB, L2 " << (c.l2_bytes >> 10) << " KiB, L3 "
    << (c.l3_bytes >> 10) << " KiB\n";
  s << "threads: " << ThreadPool::global().num_threads() << "\n";
  std::vector<GpuInfo> gpus;
  std::string gpu_status = probe_gpus(gpus);
  if (gpus.empty()) s << "gpus: none (" << gpu_status << ")\n";
  for (const auto& g : gpus)
    s << "gpu: " << g.name << " (sm_" << g.compute_major << g.compute_minor << ", "
      << (g.memory_bytes >> 20) << " MiB)\n";
  s << "cache dir: " << (o.cache_dir.empty() ? "(none: no HOME)" : o.cache_dir) << " (KILN_CACHE="
    << (o.cache == CacheMode::on    ? "on"
        : o.cache == CacheMode::off ? "off"
                                    : "readonly")
    << ")\n";
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
  if (n < 1 || n > kMaxThreads)
    throw Error("set_num_threads: expected 1 <= n <= " + std::to_string(kMaxThreads) + ", got " +
                std::to_string(n));
  ThreadPool::global().set_num_threads(n);
}

std::string cache_dir() { return global_options().cache_dir; }

void clear_cache() { cache::MemoryCache::global().clear(); }

}  // namespace kiln
