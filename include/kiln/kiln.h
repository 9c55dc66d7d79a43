// kiln: a JIT compiler for tensor programs whose shapes change at run time.
// This is the one header users include; see API.md for the public names.
#pragma once

#include <kiln/array.h>
#include <kiln/dtype.h>
#include <kiln/errors.h>
#include <kiln/function.h>
#include <kiln/options.h>
#include <kiln/tensor.h>

#include <string>
#include <vector>

namespace kiln {

struct GpuInfo {
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t memory_bytes = 0;
};

// What kiln detects about this machine (Python: kiln.device_info()).
struct DeviceInfo {
  std::vector<std::string> cpu_features;           // usable, after the KILN_ISA cap
  std::vector<std::string> cpu_features_hardware;  // as the CPU and OS report them
  std::string isa;                                 // "avx512", "avx2" or "sse"
  std::string cpu_brand;
  int num_cores = 1;
  int num_threads = 1;  // kiln's pool
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  std::vector<GpuInfo> gpus;  // empty where no CUDA driver is present
  std::string gpu_status;     // why gpus is empty, when it is
  // The LLVM backend's LLVM version; empty where kiln was built without it (-DKILN_WITH_LLVM=OFF),
  // which then compiles only what the x86 GEMM backend takes.
  std::string llvm_version;
};
DeviceInfo device_info();

// Everything kiln detects about this machine, as readable lines (what `kiln doctor` prints).
std::string doctor_report();
// Sets the size of kiln's intra-op thread pool: 1 to kMaxThreads, else kiln::Error.
inline constexpr int kMaxThreads = 1024;
void set_num_threads(int n);
std::string cache_dir();
void clear_cache();

}  // namespace kiln
