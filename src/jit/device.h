// What kiln knows about the machine: CPU feature bits (CPUID + XGETBV, so a feature the OS does not
// enable is reported absent), cache sizes from the OS, the core count. Detected once.
// KILN_ISA caps the features code generation may use, so AVX2 paths are tested on AVX-512 machines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

enum class CpuFeature : uint8_t {
  sse42,
  avx,
  avx2,
  fma,
  f16c,
  avx512f,
  avx512bw,
  avx512dq,
  avx512vl,
  avx512_bf16,
  avx512_fp16,
  avx512_vnni,
  avx_vnni,
  amx_tile,
  amx_bf16,
  amx_int8,
  kCount
};

struct CpuInfo {
  uint64_t features = 0;         // bitset over CpuFeature, as the hardware and OS report
  uint64_t usable_features = 0;  // after the KILN_ISA cap
  int64_t l1d_bytes = 48 << 10;
  int64_t l1d_ways = 0;  // associativity; 0: not reported
  int64_t l2_bytes = 2 << 20;
  int64_t l3_bytes = 32 << 20;
  int cores = 1;
  std::string vendor;
  std::string brand;

  bool has(CpuFeature f) const { return usable_features >> static_cast<int>(f) & 1; }
  bool hardware_has(CpuFeature f) const { return features >> static_cast<int>(f) & 1; }
  // Names of usable features, e.g. "avx2 fma avx512f ...".
  std::string feature_names(bool usable_only = true) const;
  // The widest vector ISA code may use: "avx512", "avx2" or "sse".
  std::string isa() const;
  // Everything that changes generated code, for cache keys.
  std::string fingerprint() const;
};

const CpuInfo& cpu_info();
std::string_view cpu_feature_name(CpuFeature f);

}  // namespace kiln
