// The GEMM calls of gemm.h: plans memoized by shape, layout and thread count (and each thread's
// last plan without a lock), batched and prepacked calls, B packed once, kernel listings.
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/kernel_registry.h"
#include "codegen/x86/pack.h"
#include "jit/thread_pool.h"
#include "support/check.h"
#include "support/log.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::x86 {

namespace {

constexpr size_t kMaxPlans = 4096;

// Plans memoized by everything but the data pointers.
struct PlanKey {
  int64_t M, N, K, a_rs, a_cs, b_rs, b_cs, ldc, ld_res;
  // isa (bits 0-7), bias (9), scale (10), residual (11), dynamic m / nk (12-13), residual
  // multiplies (14), column scale (15), activation (16-23), BFrom (24-25), threads (32-63).
  uint64_t small;
  // Inlined, unrolled and branch-free: checked on every x86::gemm call against the thread's last
  // plan. A memcmp call there made a 16^3 call 1-7 ns slower (74-81 vs 73-74 ns); a 17-word key
  // compared word by word with an early exit took ~105 instructions, these 10 words ~30.
  bool operator==(const PlanKey& o) const {
    const auto *x = reinterpret_cast<const uint64_t*>(this),
               *y = reinterpret_cast<const uint64_t*>(&o);
    uint64_t diff = 0;
#pragma GCC unroll 16
    for (size_t i = 0; i < sizeof(*this) / 8; ++i) diff |= x[i] ^ y[i];
    return diff == 0;
  }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    const auto* w = reinterpret_cast<const int64_t*>(&k);
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof(k) / 8; ++i) h = (h ^ uint64_t(w[i])) * 0xff51afd7ed558ccdull;
    return size_t(h ^ (h >> 29));
  }
};

// Each thread's last plan (key and owner). Reached through an initial-exec pointer: a
// thread_local object with a destructor is a __tls_get_addr call per access in a shared library
// (~15 ns here); the owner below frees it when the thread exits.
struct LastPlan {
  PlanKey key{};
  std::shared_ptr<const GemmPlan> plan;
};
thread_local LastPlan* t_last_plan __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_last_plan_gone __attribute__((tls_model("initial-exec"))) = false;

LastPlan* last_plan() {
  if (t_last_plan || t_last_plan_gone) return t_last_plan;
  struct Owner {
    LastPlan plan;
    ~Owner() { t_last_plan = nullptr, t_last_plan_gone = true; }
  };
  thread_local Owner owner;
  return t_last_plan = &owner.plan;
}

// Symbolic extents (GemmProblem::dynamic_m, dynamic_nk): each call's extents get the plan an
// exact problem of them gets, with kernels specialized on them (generated at the extents' first
// call, ~0.01-0.06 ms a kernel, 1-3 kernels of 1-4 KB a plan), while the kernels such plans add to
// the registry stay within the budget. After it, new extents get plans over the bounded kernel sets
// the flags ask for (GemmStats::symbolic_bounded_plans; logged once). Bounded against exact, all
// dims symbolic, paired plans, Intel Xeon, 2 threads: 16^3 0.21x, 17^3 0.38x, 8x512x512 0.33x,
// 33^3 0.46x, 64^3 0.48x, 23x57x91 0.59x, 100x50x30 0.59x, 48^3 0.62x, 128^3 0.72x, 200^3 0.69x;
// 256^3 and above 1.00x (the same packed kernels). M alone symbolic: 16^3 0.73x, 33^3 0.80x,
// others 0.98-1.01x.
constexpr int64_t kSymbolicExactKernels = 1024;
std::atomic<int64_t> g_symbolic_exact_budget{kSymbolicExactKernels};
std::atomic<int64_t> g_symbolic_exact_kernels{0};
std::atomic<int64_t> g_symbolic_exact_plans{0};
std::atomic<int64_t> g_symbolic_bounded_plans{0};

// Kernels in the registry: generated here or loaded from the disk cache.
int64_t registry_kernels() { return kernels_generated() + kernels_loaded_from_disk(); }

// Where a plan reads B: in place, from a PackedB, or from either (gemm_prepacked with symbolic
// dims and p.b given): in place where the exact plan of the call's extents reads it so faster
// than the packed copy (GemmPlan::prepacked_b_pays), as a fixed plan would (x86_backend.cpp).
// The packed copy was made for the extents the kernel was compiled at (a constant weight with M
// symbolic). M symbolic, against the packed copy alone, paired, Intel Xeon, 2 threads:
// 1x256x256 1.98x, 4x256x256 1.52x, 8x256x256 1.42x, 100x64x64 1.52x, 300x100x100 1.17x,
// 16x128x4096 1.35x; extents whose exact plan packs 0.99-1.00x.
enum class BFrom : uint64_t { in_place, packed, packed_or_in_place };

std::shared_ptr<const GemmPlan> make_plan(const GemmProblem& p, Isa isa, int threads, BFrom from) {
  const bool prepacked = from != BFrom::in_place;
  if (!p.dynamic_m && !p.dynamic_nk) return GemmPlan::make(p, isa, threads, prepacked);
  if (g_symbolic_exact_kernels.load() < g_symbolic_exact_budget.load()) {
    GemmProblem exact = p;
    exact.dynamic_m = exact.dynamic_nk = false;
    // Kernels other threads add meanwhile are charged too: the budget errs on the low side.
    const int64_t before = registry_kernels();
    std::shared_ptr<const GemmPlan> plan;
    if (from == BFrom::packed_or_in_place) plan = GemmPlan::make(exact, isa, threads, false);
    if (!plan || plan->prepacked_b_pays()) plan = GemmPlan::make(exact, isa, threads, prepacked);
    g_symbolic_exact_kernels.fetch_add(registry_kernels() - before);
    g_symbolic_exact_plans.fetch_add(1);
    return plan;
  }
  if (g_symbolic_bounded_plans.fetch_add(1) == 0)
    KILN_LOG_AT(warn) << "matmuls with symbolic dims have generated "
                      << g_symbolic_exact_kernels.load()
                      << " kernels specialized on their calls' extents (the budget is "
                      << g_symbolic_exact_budget.load()
                      << "); new extents from now on run plans over bounded kernel sets, slower "
                         "for small shapes (first: "
                      << p.M << "x" << p.N << "x" << p.K << ")";
  return GemmPlan::make(p, isa, threads, prepacked);
}

// The plan for p, memoized by everything but the data pointers. A repeat of this thread's last
// problem returns its plan without the shared lock, the hash and a shared_ptr copy (four locked
// instructions, ~35 ns of a ~100 ns 16^3 call); the plan stays valid until this thread's next
// call. Otherwise the plan is found or made, and `keep` owns it.
const GemmPlan& plan_for(const GemmProblem& p, Isa isa, int threads, BFrom from,
                         std::shared_ptr<const GemmPlan>& keep) {
  static std::shared_mutex mu;
  static auto* plans =
      new std::unordered_map<PlanKey, std::shared_ptr<const GemmPlan>, PlanKeyHash>();
  const bool res = p.epi.residual != nullptr;
  const uint64_t small =
      uint64_t(isa) | uint64_t(p.epi.bias != nullptr) << 9 | uint64_t(p.epi.scale != 1.0f) << 10 |
      uint64_t(res) << 11 | uint64_t(p.dynamic_m) << 12 | uint64_t(p.dynamic_nk) << 13 |
      uint64_t(res && p.epi.residual_mul) << 14 | uint64_t(p.epi.col_scale != nullptr) << 15 |
      uint64_t(uint8_t(p.epi.act)) << 16 | uint64_t(from) << 24 | uint64_t(uint32_t(threads)) << 32;
  const PlanKey key{p.M,
                    p.N,
                    p.K,
                    p.a.row_stride,
                    p.a.col_stride,
                    p.b.row_stride,
                    p.b.col_stride,
                    p.ldc,
                    res ? p.epi.ld_residual : 0,
                    small};
  LastPlan* last = last_plan();
  if (last && last->plan && last->key == key) return *last->plan;
  {
    std::shared_lock lock(mu);
    auto it = plans->find(key);
    if (it != plans->end()) keep = it->second;
  }
  if (!keep) {
    auto plan = make_plan(p, isa, threads, from);
    std::unique_lock lock(mu);
    // Symbolic extents make a plan per extent seen: keep the table bounded (plans are small and
    // quick to remake; the kernels they use stay in the registry).
    if (plans->size() >= kMaxPlans) plans->clear();
    keep = plans->try_emplace(key, std::move(plan)).first->second;
  }
  if (last) last->key = key, last->plan = keep;
  return *keep;
}

}  // namespace

void gemm(const GemmProblem& p, ThreadPool& pool, Isa isa) {
  std::shared_ptr<const GemmPlan> keep;
  plan_for(p, isa, pool.num_threads(), BFrom::in_place, keep).run(p, pool);
}

void gemm(const GemmProblem& p, ThreadPool& pool) { gemm(p, pool, selected_isa()); }

void gemm_batched(const GemmProblem& p, int64_t batch, const BatchStrides& st, ThreadPool& pool,
                  Isa isa) {
  KILN_CHECK(batch >= 0) << "negative batch " << batch;
  if (batch == 0) return;
  auto item = [&](int64_t b) {
    GemmProblem q = p;
    q.a.data = p.a.data + b * st.a;
    q.b.data = p.b.data + b * st.b;
    q.c = p.c + b * st.c;
    if (p.epi.residual) q.epi.residual = p.epi.residual + b * st.residual;
    return q;
  };
  // Small problems run one per task on the pool's threads, each alone: blocked for one thread.
  // So do larger ones as far as the batch shares out evenly over the threads: each thread then
  // runs whole problems, with no hand-over or shared packing inside one; the rest run one after
  // another on all threads. Intel Xeon, 2 threads, paired in one process against all of the
  // batch one after another: 8x512^3 1.05x, 4x512^3 1.03x, 2x1024^3 1.02x, 16x256^3 1.09x, 48 x
  // (384x384x64, x @ w.T) 1.07x, 12x384x64x384 1.02x, 6x1000x1000x100 1.08x, 8x128x4096x1024
  // 1.01x, 4x2048x2048x64 1.03x; odd batches (the last problem on both threads) 3x512^3 1.02x,
  // 5x256^3 1.06x, 3x1000x1000x100 1.05x, 5 x 384x384x64 (x @ w.T) 1.03x, 3x2048x2048x64 1.01x,
  // 7x300^3 1.06x, 3x128x4096x1024 1.00x, 9x200^3 1.03x.
  const int64_t threads = pool.num_threads();
  const int64_t per_task = p.M * p.N * p.K <= 4 * kSmallVolume ? batch
                           : threads > 1                       ? batch - batch % threads
                                                               : 0;
  if (per_task > 0) {
    // Valid until this thread's next plan_for call (the one below comes after its last use).
    std::shared_ptr<const GemmPlan> keep;
    const GemmPlan& plan = plan_for(p, isa, 1, BFrom::in_place, keep);
    pool.parallel_for(per_task, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) plan.run_on(item(b), nullptr);
    });
  }
  if (per_task < batch) {
    std::shared_ptr<const GemmPlan> keep;
    const GemmPlan& plan = plan_for(p, isa, int(threads), BFrom::in_place, keep);
    for (int64_t b = per_task; b < batch; ++b) plan.run_on(item(b), &pool);
  }
}

void gemm_batched(const GemmProblem& p, int64_t batch, const BatchStrides& st, ThreadPool& pool) {
  gemm_batched(p, batch, st, pool, selected_isa());
}

void PackedB::FreeDeleter::operator()(float* p) const { std::free(p); }

std::shared_ptr<const PackedB> pack_b(MatrixRef b, int64_t K, int64_t N, Isa isa) {
  // The packing routines of an ISA use its instructions (AVX-512's panels: zmm loads and stores).
  KILN_CHECK(isa_supported(isa)) << "this CPU cannot pack B for " << isa_name(isa) << " kernels";
  KILN_CHECK(K >= 0 && N >= 0) << "pack_b of " << K << "x" << N;
  const int64_t NR = packed_nr(isa), npanels = ceil_div(N, NR);
  const size_t bytes = size_t(std::max<int64_t>(npanels * K * NR, 16)) * sizeof(float);
  std::unique_ptr<float[], PackedB::FreeDeleter> data(static_cast<float*>(
      std::aligned_alloc(64, (bytes + 63) / 64 * 64 + kPackPrefetchSlackBytes)));
  KILN_CHECK(data != nullptr) << "out of memory packing B (" << bytes << " bytes)";
  for (int64_t jp = 0; jp < npanels; ++jp)
    pack_b_panel(b, K, jp * NR, std::min(NR, N - jp * NR), NR, data.get() + jp * K * NR);
  return std::make_shared<PackedB>(isa, K, N, NR, std::move(data));
}

std::shared_ptr<const PackedB> pack_b(MatrixRef b, int64_t K, int64_t N) {
  return pack_b(b, K, N, selected_isa());
}

void gemm_prepacked(const GemmProblem& p, const PackedB& packed, ThreadPool& pool) {
  std::shared_ptr<const GemmPlan> keep;
  const BFrom from =
      (p.dynamic_m || p.dynamic_nk) && p.b.data ? BFrom::packed_or_in_place : BFrom::packed;
  const GemmPlan& plan = plan_for(p, packed.isa(), pool.num_threads(), from, keep);
  plan.run(p, pool, plan.reads_packed_b() ? &packed : nullptr);
}

std::vector<KernelInfo> kernels_for(const GemmProblem& p, Isa isa) {
  return make_plan(p, isa, ThreadPool::global().num_threads(), BFrom::in_place)->kernels();
}

std::string listing_for(const GemmProblem& p, Isa isa) {
  return listing_of(*make_plan(p, isa, ThreadPool::global().num_threads(), BFrom::in_place));
}

SymbolicPlanCounts symbolic_plan_counts() {
  return {g_symbolic_exact_plans.load(), g_symbolic_bounded_plans.load(),
          g_symbolic_exact_kernels.load()};
}

int64_t set_symbolic_exact_kernel_budget(int64_t kernels) {
  KILN_CHECK(kernels >= 0) << "negative kernel budget " << kernels;
  return g_symbolic_exact_budget.exchange(kernels);
}

std::string listing_of(const GemmPlan& plan) {
  std::string out;
  for (const KernelInfo& k : plan.kernels()) {
    out += k.listing;
    out += "; codegen " + std::to_string(k.codegen_ms) + " ms, " + std::to_string(k.code_bytes) +
           " bytes\n\n";
  }
  return out;
}

std::string listing_for(const GemmProblem& p) { return listing_for(p, selected_isa()); }

}  // namespace kiln::x86
