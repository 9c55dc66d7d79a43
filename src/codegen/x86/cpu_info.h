// What the x86 backend knows about the host: ISA features (CPUID through asmjit, capped by
// KILN_ISA), the L2 size and L1's associativity (from kiln::cpu_info()). Detected once per process.
#pragma once

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"

#include <cstdint>

namespace kiln::x86 {

struct HostCpu {
  bool avx2_fma = false;
  bool avx512f = false;
  CacheSizes caches;
};

const HostCpu& host_cpu();

}  // namespace kiln::x86
