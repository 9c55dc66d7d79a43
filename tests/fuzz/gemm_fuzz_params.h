// The GEMM fuzzer's case parameters (tests/fuzz/x86_gemm_fuzz.cpp): everything one case is, as
// drawn and as its repro line carries it, and that line's writing and parsing.
#pragma once

#include "x86_gemm_testing.h"

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::x86::fuzz {

using namespace kiln::x86::testing;

// ----------------------------------------------------------------------------------------------
// Parameters of one case (everything the repro line carries).

constexpr int kCustom = 7;  // OpSpec::kind: custom strides (0-6: testing::Layout)

struct OpSpec {
  int kind = 0;
  int64_t rs = 0, cs = 0;
};

inline const char* const kActNames[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};

struct CacheChoice {
  const char* name;
  CacheSizes caches;
};
inline std::vector<CacheChoice>& cache_choices() {
  static std::vector<CacheChoice> v = {
      {"host", host_cpu().caches},
      {"zen3", CacheSizes{512 << 10, 8, 4096}},
      {"zen5", CacheSizes{1 << 20, 12, 4096}},
      {"xeon", CacheSizes{2 << 20, 12, 4096}},
      {"l2_256k", CacheSizes{256 << 10, 8, 4096}},
      // A Zen 3 as the planner sees it (amd_zen: the Zen cores' rules; "zen3" above predates them).
      {"zen3_rules", CacheSizes{512 << 10, 8, 4096, false, 32 << 20, true}},
  };
  return v;
}
inline int cache_index(const std::string& name) {
  for (size_t c = 0; c < cache_choices().size(); ++c)
    if (cache_choices()[c].name == name) return int(c);
  return 0;
}

struct Params {
  int64_t M = 1, N = 1, K = 1;
  OpSpec a, b;
  int64_t c_pad = 3;  // ldc = N + c_pad
  int64_t r_pad = 5;  // ld_residual = N + r_pad; -1: one row broadcast (ld_residual 0)
  int act = 0;
  bool bias = false, residual = false;
  bool gate = false;       // the residual multiplies
  bool col_scale = false;  // a column scale (the bias's values: both guarded the same way)
  float scale = 1.0f;      // 1: none
  bool prepacked = false;
  int threads = 2;  // the plan's
  int caches = 0;   // cache_choices()
  bool dyn_m = false, dyn_nk = false;
  bool api = false;  // also through gemm() / gemm_prepacked() on a 2-thread pool
  uint32_t data_seed = 1;
  std::string isa;     // repro only: one ISA ("" all)
  std::string recipe;  // how it was drawn (information only)
};

inline std::string op_name(const OpSpec& o) {
  if (o.kind < kCustom) return layout_name(Layout(o.kind));
  return "s" + std::to_string(o.rs) + "," + std::to_string(o.cs);
}

inline bool parse_op(const std::string& s, OpSpec& o) {
  for (int k = 0; k < kCustom; ++k)
    if (s == layout_name(Layout(k))) {
      o = OpSpec{k, 0, 0};
      return true;
    }
  if (s.size() > 1 && s[0] == 's') {
    const size_t comma = s.find(',');
    if (comma == std::string::npos) return false;
    o.kind = kCustom;
    o.rs = std::stoll(s.substr(1, comma - 1));
    o.cs = std::stoll(s.substr(comma + 1));
    return true;
  }
  return false;
}

inline std::string repro_string(const Params& P, const char* isa = nullptr) {
  std::ostringstream o;
  o << "M=" << P.M << " N=" << P.N << " K=" << P.K << " A=" << op_name(P.a) << " B=" << op_name(P.b)
    << " c_pad=" << P.c_pad << " r_pad=" << P.r_pad << " act=" << kActNames[P.act]
    << " bias=" << P.bias << " scale=" << P.scale << " res=" << P.residual << " gate=" << P.gate
    << " cscale=" << P.col_scale << " prepacked=" << P.prepacked << " threads=" << P.threads
    << " caches=" << cache_choices()[size_t(P.caches)].name << " dyn_m=" << P.dyn_m
    << " dyn_nk=" << P.dyn_nk << " api=" << P.api << " seed=" << P.data_seed;
  if (isa) o << " isa=" << isa;
  return o.str();
}

inline bool parse_repro(const std::string& line, Params& P) {
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const size_t eq = tok.find('=');
    if (eq == std::string::npos) return false;
    const std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    if (k == "M")
      P.M = std::stoll(v);
    else if (k == "N")
      P.N = std::stoll(v);
    else if (k == "K")
      P.K = std::stoll(v);
    else if (k == "A") {
      if (!parse_op(v, P.a)) return false;
    } else if (k == "B") {
      if (!parse_op(v, P.b)) return false;
    } else if (k == "c_pad")
      P.c_pad = std::stoll(v);
    else if (k == "r_pad")
      P.r_pad = std::stoll(v);
    else if (k == "act") {
      bool found = false;
      for (int a = 0; a < 5; ++a)
        if (v == kActNames[a]) P.act = a, found = true;
      if (!found) return false;
    } else if (k == "bias")
      P.bias = v == "1";
    else if (k == "scale")
      P.scale = std::stof(v);
    else if (k == "res")
      P.residual = v == "1";
    else if (k == "gate")
      P.gate = v == "1";
    else if (k == "cscale")
      P.col_scale = v == "1";
    else if (k == "prepacked")
      P.prepacked = v == "1";
    else if (k == "threads")
      P.threads = std::stoi(v);
    else if (k == "caches") {
      bool found = false;
      for (size_t c = 0; c < cache_choices().size(); ++c)
        if (v == cache_choices()[c].name) P.caches = int(c), found = true;
      if (!found) return false;
    } else if (k == "dyn_m")
      P.dyn_m = v == "1";
    else if (k == "dyn_nk")
      P.dyn_nk = v == "1";
    else if (k == "api")
      P.api = v == "1";
    else if (k == "seed")
      P.data_seed = uint32_t(std::stoul(v));
    else if (k == "isa")
      P.isa = v;
    else
      return false;
  }
  return true;
}

}  // namespace kiln::x86::fuzz
