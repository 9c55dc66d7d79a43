// Host feature and cache detection for the x86 backend.
#include "codegen/x86/cpu_info.h"

#include <asmjit/x86.h>
#include <kiln/options.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace kiln::x86 {

namespace {

// Reads e.g. "48K" from /sys/devices/system/cpu/cpu0/cache/index<i>/size for the given level/type.
int64_t sysfs_cache_bytes(int level, const char* type) {
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(dir + "level"), tf(dir + "type"), sf(dir + "size");
    int l = 0;
    std::string t, s;
    if (!(lf >> l) || !(tf >> t) || !(sf >> s)) continue;
    if (l != level || (t != type && t != "Unified")) continue;
    char* end = nullptr;
    int64_t v = std::strtoll(s.c_str(), &end, 10);
    if (end && (*end == 'K' || *end == 'k')) v *= 1024;
    if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
    if (v > 0) return v;
  }
  return 0;
}

HostCpu detect() {
  HostCpu h;
  const asmjit::CpuInfo& cpu = asmjit::CpuInfo::host();
  using F = asmjit::CpuFeatures::X86;
  h.avx2_fma = cpu.hasFeature(F::kAVX2) && cpu.hasFeature(F::kFMA);
  h.avx512f = h.avx2_fma && cpu.hasFeature(F::kAVX512_F);
  long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  CacheSizes& c = h.caches;
  c.l1d_bytes = l1 > 0 ? l1 : sysfs_cache_bytes(1, "Data");
  c.l2_bytes = l2 > 0 ? l2 : sysfs_cache_bytes(2, "Unified");
  if (c.l1d_bytes <= 0) c.l1d_bytes = CacheSizes{}.l1d_bytes;
  if (c.l2_bytes <= 0) c.l2_bytes = CacheSizes{}.l2_bytes;
  return h;
}

}  // namespace

const HostCpu& host_cpu() {
  static const HostCpu cpu = detect();
  return cpu;
}

bool isa_supported(Isa isa) {
  const HostCpu& h = host_cpu();
  switch (isa) {
    case Isa::avx2:
      return h.avx2_fma;
    case Isa::avx512:
      return h.avx512f;
  }
  return false;
}

Isa selected_isa() {
  IsaCap cap = global_options().isa;
  if (cap != IsaCap::avx2 && host_cpu().avx512f) return Isa::avx512;
  return Isa::avx2;
}

bool available() { return host_cpu().avx2_fma; }

const char* isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : "avx2"; }

std::string isa_name() { return isa_name(selected_isa()); }

}  // namespace kiln::x86
