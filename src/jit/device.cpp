#include "jit/device.h"

#include <kiln/options.h>

#include <cpuid.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace kiln {

namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

void set(uint64_t& bits, CpuFeature f, bool on) {
  if (on) bits |= uint64_t{1} << static_cast<int>(f);
}

// A field of CPU 0's cache at `level` of `type` from sysfs ("size": "48K" in bytes; 0: unknown).
int64_t read_cache_field(int level, const char* type, const char* field) {
  for (int idx = 0; idx < 8; ++idx) {
    std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
    std::ifstream lv(base + "level"), ty(base + "type"), sz(base + field);
    int l = 0;
    std::string t, s;
    if (!(lv >> l) || !(ty >> t) || !(sz >> s)) continue;
    if (l != level || (t != type && t != "Unified")) continue;
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return 0;
    int64_t v = std::stoll(s);
    if (s.back() == 'K') v <<= 10;
    if (s.back() == 'M') v <<= 20;
    return v;
  }
  return 0;
}

CpuInfo detect() {
  CpuInfo info;
  unsigned a, b, c, d;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  char vendor[13] = {};
  __cpuid(0, a, b, c, d);
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  info.vendor = vendor;
  uint64_t f = 0;
  __cpuid(1, a, b, c, d);
  bool osxsave = c >> 27 & 1;
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool ymm_os = (xcr0 & 6) == 6;
  bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  bool amx_os = (xcr0 & (3u << 17)) == (3u << 17);
  set(f, CpuFeature::sse42, c >> 20 & 1);
  set(f, CpuFeature::avx, (c >> 28 & 1) && ymm_os);
  set(f, CpuFeature::fma, (c >> 12 & 1) && ymm_os);
  set(f, CpuFeature::f16c, (c >> 29 & 1) && ymm_os);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    set(f, CpuFeature::avx2, (b >> 5 & 1) && ymm_os);
    set(f, CpuFeature::avx512f, (b >> 16 & 1) && zmm_os);
    set(f, CpuFeature::avx512dq, (b >> 17 & 1) && zmm_os);
    set(f, CpuFeature::avx512bw, (b >> 30 & 1) && zmm_os);
    set(f, CpuFeature::avx512vl, (b >> 31 & 1) && zmm_os);
    set(f, CpuFeature::avx512_vnni, (c >> 11 & 1) && zmm_os);
    set(f, CpuFeature::avx512_fp16, (d >> 23 & 1) && zmm_os);
    set(f, CpuFeature::amx_bf16, (d >> 22 & 1) && amx_os);
    set(f, CpuFeature::amx_tile, (d >> 24 & 1) && amx_os);
    set(f, CpuFeature::amx_int8, (d >> 25 & 1) && amx_os);
    __cpuid_count(7, 1, a, b, c, d);
    set(f, CpuFeature::avx_vnni, (a >> 4 & 1) && ymm_os);
    set(f, CpuFeature::avx512_bf16, (a >> 5 & 1) && zmm_os);
  }
  info.features = f;
  // Apply the ISA cap: avx2 drops AVX-512 and AMX; avx512 drops AMX.
  uint64_t usable = f;
  IsaCap cap = global_options().isa;
  auto clear = [&](CpuFeature x) { usable &= ~(uint64_t{1} << static_cast<int>(x)); };
  if (cap == IsaCap::avx2 || cap == IsaCap::avx512) {
    clear(CpuFeature::amx_tile);
    clear(CpuFeature::amx_bf16);
    clear(CpuFeature::amx_int8);
  }
  if (cap == IsaCap::avx2) {
    for (CpuFeature x :
         {CpuFeature::avx512f, CpuFeature::avx512bw, CpuFeature::avx512dq, CpuFeature::avx512vl,
          CpuFeature::avx512_bf16, CpuFeature::avx512_fp16, CpuFeature::avx512_vnni})
      clear(x);
  }
  info.usable_features = usable;
  // Brand string.
  char brand[49] = {};
  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    for (unsigned i = 0; i < 3; ++i) {
      __cpuid(0x80000002 + i, a, b, c, d);
      std::memcpy(brand + i * 16, &a, 4);
      std::memcpy(brand + i * 16 + 4, &b, 4);
      std::memcpy(brand + i * 16 + 8, &c, 4);
      std::memcpy(brand + i * 16 + 12, &d, 4);
    }
  }
  info.brand = brand;
  if (int64_t v = read_cache_field(1, "Data", "size")) info.l1d_bytes = v;
  if (int64_t v = read_cache_field(1, "Data", "ways_of_associativity")) info.l1d_ways = v;
  if (int64_t v = read_cache_field(2, "Unified", "size")) info.l2_bytes = v;
  if (int64_t v = read_cache_field(3, "Unified", "size")) info.l3_bytes = v;
  unsigned hc = std::thread::hardware_concurrency();
  info.cores = hc ? static_cast<int>(hc) : 1;
  return info;
}

}  // namespace

std::string_view cpu_feature_name(CpuFeature f) {
  static const char* names[] = {"sse4.2",   "avx",         "avx2",        "fma",
                                "f16c",     "avx512f",     "avx512bw",    "avx512dq",
                                "avx512vl", "avx512_bf16", "avx512_fp16", "avx512_vnni",
                                "avx_vnni", "amx_tile",    "amx_bf16",    "amx_int8"};
  return names[static_cast<int>(f)];
}

std::string CpuInfo::feature_names(bool usable_only) const {
  std::string s;
  uint64_t bits = usable_only ? usable_features : features;
  for (int i = 0; i < static_cast<int>(CpuFeature::kCount); ++i)
    if (bits >> i & 1) {
      if (!s.empty()) s += ' ';
      s += cpu_feature_name(static_cast<CpuFeature>(i));
    }
  return s;
}

std::string CpuInfo::isa() const {
  if (has(CpuFeature::avx512f) && has(CpuFeature::avx512bw) && has(CpuFeature::avx512vl) &&
      has(CpuFeature::avx512dq))
    return "avx512";
  if (has(CpuFeature::avx2) && has(CpuFeature::fma)) return "avx2";
  return "sse";
}

std::string CpuInfo::fingerprint() const {
  return "features=" + std::to_string(usable_features) + " l1d=" + std::to_string(l1d_bytes) +
         " l2=" + std::to_string(l2_bytes);
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

}  // namespace kiln
