// Host feature and cache detection for the x86 backend.
#include "codegen/x86/cpu_info.h"

#include "jit/device.h"

#include <asmjit/x86.h>
#include <kiln/options.h>

#include <string>

namespace kiln::x86 {

namespace {

HostCpu detect() {
  HostCpu h;
  const asmjit::CpuInfo& cpu = asmjit::CpuInfo::host();
  using F = asmjit::CpuFeatures::X86;
  h.avx2_fma = cpu.hasFeature(F::kAVX2) && cpu.hasFeature(F::kFMA);
  h.avx512f = h.avx2_fma && cpu.hasFeature(F::kAVX512_F);
  // Hygon's cores are Zen 1's.
  const bool hygon = cpu.isVendor("HYGON") && cpu.familyId() == 0x18;
  h.caches.amd_zen = (cpu.isVendor("AMD") && cpu.familyId() >= 0x17) || hygon;
  h.caches.amd_zen5 = cpu.isVendor("AMD") && cpu.familyId() == 0x1A;
  h.caches.split_256 =
      (cpu.isVendor("AMD") && cpu.familyId() == 0x17 && cpu.modelId() < 0x30) || hygon;
  // The L2 and L3 sizes the JIT's device info reads (L2's is also in the disk cache's device
  // fingerprint).
  const kiln::CpuInfo& info = kiln::cpu_info();
  if (info.l2_bytes > 0) h.caches.l2_bytes = info.l2_bytes;
  if (info.l3_bytes > 0) h.caches.l3_bytes = info.l3_bytes;
  // L1's ways where reported with a size they divide into whole sets of lines (else CacheSizes'
  // 8 ways of 4 KiB, the fewest seen on x86).
  const int64_t way_bytes = info.l1d_ways > 0 ? info.l1d_bytes / info.l1d_ways : 0;
  if (way_bytes >= 64 && way_bytes * info.l1d_ways == info.l1d_bytes && way_bytes % 64 == 0) {
    h.caches.l1d_ways = info.l1d_ways;
    h.caches.l1d_way_bytes = way_bytes;
  }
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
