// The disk cache through the real JIT (cache_jit_probe.h): kernels round-trip through it in new
// processes, every key component is part of the key, and so is the KILN_ISA cap.
#include <kiln/kiln.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cache/disk_cache.h"
#include "cache/entry_format.h"
#include "cache/key.h"
#include "cache_jit_probe.h"
#include "cache_test_util.h"
#include "needs_llvm.h"

using namespace kiln::cache;
using namespace kiln::cache::testing;

namespace {

// Replaces the token after `prefix` (up to the next space) with `value`; "" if prefix is absent.
std::string replace_token(const std::string& s, const std::string& prefix,
                          const std::string& value) {
  size_t at = s.find(prefix);
  if (at == std::string::npos) return {};
  size_t from = at + prefix.size();
  size_t to = s.find(' ', from);
  if (to == std::string::npos) to = s.size();
  return s.substr(0, from) + value + s.substr(to);
}

std::string bump_version(const std::string& v) {  // "0.1.0" -> "0.1.1"
  size_t dot = v.rfind('.');
  std::string last = dot == std::string::npos ? v : v.substr(dot + 1);
  std::string head = dot == std::string::npos ? "" : v.substr(0, dot + 1);
  char* end = nullptr;
  long n = std::strtol(last.c_str(), &end, 10);
  if (last.empty() || *end) return v + ".1";
  return head + std::to_string(n + 1);
}

}  // namespace

TEST_CASE("JIT kernels round-trip through the disk cache in new processes",
          "[cache][jit]" KILN_NEEDS_LLVM) {
  constexpr int kKernels = 12;
  TempDir tmp;
  ProbeEnv pe = probe_env(tmp, kKernels);

  ProbeResult cold = run_probe(pe, tmp.path(), "cold");
  check_clean(cold, kKernels);
  CHECK(cold["disk_hits"] == 0);
  CHECK(cold["compiles"] == kKernels);
  CHECK(cold["dc_stores"] == cold.llvm());
  CHECK(entry_count(pe.cache_dir) == cold.llvm());

  ProbeResult warm = run_probe(pe, tmp.path(), "warm");
  check_clean(warm, kKernels);
  CHECK(warm.llvm() == cold.llvm());
  CHECK(warm["disk_hits"] == warm.llvm());  // every kernel loaded from disk
  CHECK(warm["dc_stores"] == 0);

  pe.cache_mode = "readonly";
  ProbeResult ro = run_probe(pe, tmp.path(), "readonly");
  check_clean(ro, kKernels);
  CHECK(ro["disk_hits"] == ro.llvm());
  CHECK(ro["dc_stores"] == 0);

  pe.cache_mode = "off";
  ProbeResult off = run_probe(pe, tmp.path(), "off");
  INFO(describe(off));
  REQUIRE(off.exited_ok);
  CHECK(off["wrong"] == 0);
  CHECK(off["disk_hits"] == 0);
  CHECK(off["disk_enabled"] == 0);
  CHECK(entry_count(pe.cache_dir) == cold.llvm());

  WARN("JIT round trip, " << kKernels << " functions / " << cold.llvm() << " LLVM kernels: cold "
                          << cold["disk_hits"] << " disk hits in " << cold["elapsed_us"] / 1000
                          << " ms; warm " << warm["disk_hits"] << " in "
                          << warm["elapsed_us"] / 1000 << " ms; readonly " << ro["disk_hits"]
                          << "; off " << off["disk_hits"]);
}

TEST_CASE("changing any key component is a miss, an unchanged key is a hit",
          "[cache][jit][key]" KILN_NEEDS_LLVM) {
  constexpr int kKernels = 8;
  TempDir tmp;
  ProbeEnv base = probe_env(tmp, kKernels);
  ProbeResult first = run_probe(base, tmp.path(), "base");
  check_clean(first, kKernels);
  REQUIRE(first["disk_hits"] == 0);
  const int64_t n = first.llvm();

  // The values the JIT really put in its keys, and one changed component at a time.
  auto real = real_fields(base.cache_dir);
  struct Change {
    std::string what, field, value;
  };
  std::vector<Change> changes;
  changes.push_back({"kiln version " + real["kiln"] + " -> " + bump_version(real["kiln"]), "kiln",
                     bump_version(real["kiln"])});
  // A rebuilt kiln (same version number, other code) must not load this build's kernels.
  changes.push_back({"kiln build " + real["kiln_build"] + " -> another build", "kiln_build",
                     "0123456789abcdef0123456789abcdef01234567"});
  {
    std::string v = replace_token(real["backend"], "llvm ", "18.1.8");
    REQUIRE(!v.empty());
    changes.push_back({"LLVM version -> 18.1.8", "backend", v});
  }
  {
    // Target features: flip the sign of the first feature in the list.
    std::string b = real["backend"];
    size_t at = b.find("features=");
    REQUIRE(at != std::string::npos);
    size_t sign = b.find_first_of("+-", at);
    REQUIRE(sign != std::string::npos);
    b[sign] = b[sign] == '+' ? '-' : '+';
    changes.push_back({"LLVM target features (one flipped)", "backend", b});
    std::string cpu = replace_token(real["backend"], "cpu=", "x86-64-v2");
    REQUIRE(!cpu.empty());
    changes.push_back({"LLVM target cpu -> x86-64-v2", "backend", cpu});
  }
  {
    std::string d = real["device"];
    size_t at = d.find("features=");
    REQUIRE(at != std::string::npos);
    unsigned long long bits = std::strtoull(d.c_str() + at + 9, nullptr, 10);
    changes.push_back({"CPU feature bits (bit 0 flipped)", "device",
                       replace_token(d, "features=", std::to_string(bits ^ 1ull))});
    std::string l2 = replace_token(d, "l2=", "1048576000");
    REQUIRE(!l2.empty());
    changes.push_back({"CPU cache sizes (L2)", "device", l2});
  }
  changes.push_back({"options " + real["options"] + " -> abi=2", "options", "abi=2"});

  std::ostringstream table;
  for (size_t c = 0; c < changes.size(); ++c) {
    const Change& ch = changes[c];
    INFO(ch.what);
    ProbeEnv pe = base;
    pe.override_field = ch.field;
    pe.override_value = ch.value;
    ProbeResult changed = run_probe(pe, tmp.path(), "changed" + std::to_string(c));
    check_clean(changed, kKernels);
    CHECK(changed.llvm() == n);
    CHECK(changed["disk_hits"] == 0);  // a miss for every kernel
    ProbeResult again = run_probe(base, tmp.path(), "unchanged" + std::to_string(c));
    check_clean(again, kKernels);
    CHECK(again["disk_hits"] == n);  // the unchanged key still hits, 100%
    table << "\n  " << ch.what << ": changed " << changed["disk_hits"] << "/" << n
          << " disk hits; unchanged " << again["disk_hits"] << "/" << n;
  }
  // Overriding a field with its own value changes nothing (the override hook itself is neutral).
  for (const char* f : {"kiln", "kiln_build", "backend", "device", "options"}) {
    INFO("same-value override of " << f);
    ProbeEnv pe = base;
    pe.override_field = f;
    pe.override_value = real[f];
    ProbeResult same = run_probe(pe, tmp.path(), std::string("same-") + f);
    check_clean(same, kKernels);
    CHECK(same["disk_hits"] == n);
    table << "\n  " << f << " overridden with its own value: " << same["disk_hits"] << "/" << n
          << " disk hits";
  }
  WARN("key components, " << n << " LLVM kernels per process:" << table.str());
}

TEST_CASE("the KILN_ISA cap is part of the key", "[cache][jit][key]" KILN_NEEDS_LLVM) {
  if (!__builtin_cpu_supports("avx512f")) {
    WARN("skipped: this CPU has no AVX-512, so KILN_ISA=avx2 changes no code here");
    return;
  }
  constexpr int kKernels = 8;
  TempDir tmp;
  ProbeEnv pe = probe_env(tmp, kKernels);
  ProbeResult uncapped = run_probe(pe, tmp.path(), "uncapped");
  check_clean(uncapped, kKernels);
  const int64_t n = uncapped.llvm();
  CHECK(uncapped["disk_hits"] == 0);

  pe.isa = "avx2";
  ProbeResult capped = run_probe(pe, tmp.path(), "avx2");
  check_clean(capped, kKernels);
  CHECK(capped.llvm() == n);
  CHECK(capped["disk_hits"] == 0);  // AVX2-capped code never comes from AVX-512 entries
  CHECK(entry_count(pe.cache_dir) == 2 * n);
  ProbeResult capped2 = run_probe(pe, tmp.path(), "avx2-again");
  check_clean(capped2, kKernels);
  CHECK(capped2["disk_hits"] == n);

  pe.isa.clear();
  ProbeResult again = run_probe(pe, tmp.path(), "uncapped-again");
  check_clean(again, kKernels);
  CHECK(again["disk_hits"] == n);
  WARN("ISA cap, " << n << " LLVM kernels: uncapped then KILN_ISA=avx2 " << capped["disk_hits"]
                   << "/" << n << " disk hits; avx2 again " << capped2["disk_hits"] << "/" << n
                   << "; uncapped again " << again["disk_hits"] << "/" << n);
}
