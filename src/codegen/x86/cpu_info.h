// What the x86 backend knows about the host: ISA features (CPUID through asmjit, capped by
// KILN_ISA) and data cache sizes (sysconf, else sysfs). Detected once per process.
#pragma once

#include "codegen/x86/gemm.h"

#include <cstdint>

namespace kiln::x86 {

struct HostCpu {
  bool avx2_fma = false;
  bool avx512f = false;
  int64_t l1d_bytes = 32 * 1024;
  int64_t l2_bytes = 1024 * 1024;
};

const HostCpu& host_cpu();

}  // namespace kiln::x86
