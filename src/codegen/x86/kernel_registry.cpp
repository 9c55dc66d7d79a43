// The kernel registry: descriptor -> generated code, generated once per process. Lookups take a
// shared lock; generation runs with no lock held (two threads racing on one cold descriptor may
// both generate it, and the loser's code is released).
#include "codegen/x86/kernel_registry.h"

#include "codegen/x86/generators.h"
#include "support/check.h"

#include <asmjit/x86.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace kiln::x86 {

bool KernelDesc::operator==(const KernelDesc& o) const {
  return std::memcmp(this, &o, sizeof(*this)) == 0;
}

std::string KernelDesc::name() const {
  std::string s = kind == KernelKind::packed ? "packed_" : "direct_";
  s += isa_name(Isa(isa));
  auto num = [](int64_t v) { return std::to_string(v); };
  if (kind == KernelKind::packed) {
    s += "_" + num(MR) + "x" + num(NR) + "_m" + num(rows) + "n" + num(cols);
    if (accumulate) s += "_acc";
  } else {
    s += "_M" + num(rows) + "N" + num(cols) + "K" + num(K) + "_a" + num(a_rs) + "," + num(a_cs) +
         "_b" + num(b_rs) + "_c" + num(ldc);
    if (accumulate) s += "_acc";
  }
  if (last) {
    if (has_scale) s += "_scale";
    if (has_bias) s += "_bias";
    static const char* const kActs[] = {"", "_relu", "_gelu", "_gelu_tanh", "_silu"};
    s += kActs[act];
    if (has_residual) s += "_res" + (kind == KernelKind::direct ? num(ld_res) : std::string());
  } else {
    s += "_partial";
  }
  return s;
}

namespace {

static_assert(sizeof(KernelDesc) % sizeof(int64_t) == 0);

struct DescHash {
  size_t operator()(const KernelDesc& d) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&d);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(d); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

class Registry {
 public:
  const Kernel& get(const KernelDesc& d) {
    {
      std::shared_lock lock(mu_);
      auto it = map_.find(d);
      if (it != map_.end()) return *it->second;
    }
    std::unique_ptr<Kernel> k = generate(d);
    std::unique_lock lock(mu_);
    auto [it, inserted] = map_.try_emplace(d, std::move(k));
    if (!inserted) {
      // Lost a race: keep the published kernel (its code may already be running elsewhere).
      std::lock_guard rt_lock(rt_mu_);
      rt_.release(k->fn);
    }
    return *it->second;
  }

  std::atomic<int64_t> generated{0};
  std::atomic<int64_t> codegen_ns{0};
  std::atomic<int64_t> codegen_ns_max{0};

 private:
  std::unique_ptr<Kernel> generate(const KernelDesc& d) {
    auto start = std::chrono::steady_clock::now();
    asmjit::CodeHolder code;
    code.init(rt_.environment());
    asmjit::StringLogger logger;
    code.setLogger(&logger);
    asmjit::x86::Assembler a(&code);
    if (d.kind == KernelKind::packed)
      emit_packed_kernel(a, d);
    else
      emit_direct_kernel(a, d);
    auto k = std::make_unique<Kernel>();
    asmjit::Error err;
    {
      std::lock_guard rt_lock(rt_mu_);
      err = rt_.add(&k->fn, &code);
    }
    KILN_CHECK(err == asmjit::kErrorOk)
        << "asmjit failed on " << d.name() << ": " << asmjit::DebugUtils::errorAsString(err);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    k->info.name = d.name();
    k->info.listing = "; " + k->info.name + "\n" + std::string(logger.data(), logger.dataSize());
    k->info.codegen_ms = double(ns) * 1e-6;
    k->info.code_bytes = int64_t(code.codeSize());
    generated.fetch_add(1);
    codegen_ns.fetch_add(ns);
    int64_t prev = codegen_ns_max.load();
    while (ns > prev && !codegen_ns_max.compare_exchange_weak(prev, ns)) {
    }
    return k;
  }

  std::shared_mutex mu_;
  std::unordered_map<KernelDesc, std::unique_ptr<Kernel>, DescHash> map_;
  std::mutex rt_mu_;
  asmjit::JitRuntime rt_;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: code may run during static destruction
  return *r;
}

}  // namespace

const Kernel& get_kernel(const KernelDesc& desc) { return registry().get(desc); }

int64_t kernels_generated() { return registry().generated.load(); }
double codegen_ms_total() { return double(registry().codegen_ns.load()) * 1e-6; }
double codegen_ms_max() { return double(registry().codegen_ns_max.load()) * 1e-6; }

}  // namespace kiln::x86
