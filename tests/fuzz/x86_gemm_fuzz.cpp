// Randomized differential fuzzer for the x86 GEMM planner and driver (gemm_driver.cpp,
// blocking.cpp, k_split.cpp, stream_path.cpp, dot_path.cpp): draws problems whose shapes,
// strides, epilogues, thread counts and cache sizes sit on the path-selection rules' boundaries,
// runs every ISA of supported_isas() on pools of 1-3 threads and on none, and checks C against
// the double reference with x86_gemm_testing.h's tolerance, and the memory around C (and the
// inputs) against writes.
//
//   kiln_gemm_fuzz [--seconds=N] [--seed=S] [--verbose]   N: time budget (60), S: the draw seed
//                                                         (from the clock, printed, if absent)
//   kiln_gemm_fuzz --repro='M=.. N=.. ...'                one case, from a failure's repro line
//
//   kiln_gemm_fuzz --selftest                             the check catches planted errors
//
// Each failure prints one line with every parameter (a --repro argument); the exit status is 1
// when anything failed. Cases that take over 5 s are printed as hang suspects (a watchdog prints
// them while they run, and aborts after --hang=S seconds, 300 by default). A fault inside
// GemmPlan::make is reported as a failure and the run goes on; a fault while a plan runs prints
// the case's repro line and ends the process. The summary counts, per ISA, the plans' paths and
// features (read from GemmPlan::Impl) and, per recipe of the draw, the paths it reached.
//
// Problems in the header's layouts (testing::Layout) and within kCaseVolume run through
// testing::Case and testing::worst_on_every_pool as they are; the others through FuzzCase
// (gemm_fuzz_case.h). The draw: gemm_fuzz_draw.h; a case's parameters: gemm_fuzz_params.h.
#include "gemm_fuzz_case.h"
#include "gemm_fuzz_draw.h"
#include "gemm_fuzz_params.h"
#include "x86_gemm_testing.h"

#include "codegen/x86/blocking.h"
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/kernel_registry.h"
#include "jit/thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;
using namespace kiln::x86::fuzz;

// The plan's internals (path, blocking, kernels) for the coverage counts and failure reports:
// GemmPlan::impl_ is private, and an explicit instantiation may name it.
namespace {
using ImplMember = std::unique_ptr<GemmPlan::Impl> GemmPlan::*;
ImplMember impl_member();
template <ImplMember M>
struct ImplAccess {
  friend ImplMember impl_member() { return M; }
};
template struct ImplAccess<&GemmPlan::impl_>;
const GemmPlan::Impl& impl_of(const GemmPlan& plan) { return *(plan.*impl_member()); }
}  // namespace

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ----------------------------------------------------------------------------------------------
// Plan description (coverage and reports).

const char* path_name(Path p) {
  switch (p) {
    case Path::empty:
      return "empty";
    case Path::direct:
      return "direct";
    case Path::direct_rows:
      return "direct_rows";
    case Path::direct_k:
      return "direct_k";
    case Path::skinny:
      return "skinny";
    case Path::stream:
      return "stream";
    case Path::dot:
      return "dot";
    case Path::packed:
      return "packed";
    case Path::edge_split:
      return "edge_split";
    case Path::transposed:
      return "transposed";
  }
  return "?";
}

// The path, and the features of the plan that the rules switch on.
struct PlanInfo {
  std::string path;               // e.g. "packed", "stream(column_as_row)"
  std::vector<std::string> tags;  // features, for the coverage counts
  std::string detail;             // for reports
};

PlanInfo describe(const GemmPlan& plan) {
  const GemmPlan::Impl& s = impl_of(plan);
  PlanInfo info;
  info.path = path_name(s.path);
  std::ostringstream d;
  auto tag = [&](const std::string& t) { info.tags.push_back(info.path + ":" + t); };
  bool any_cap = false, any_pf = false, any_cols_outer = false;
  for (const Kernel* k : s.used) {
    any_cap |= k->desc.rows_cap != 0;
    any_pf |= k->desc.b_prefetch != 0;
    any_cols_outer |= k->desc.cols_outer != 0;
  }
  if (any_cap) tag("rows_cap");
  if (any_pf) tag("b_prefetch");
  if (any_cols_outer) tag("cols_outer");
  switch (s.path) {
    case Path::empty:
      break;
    case Path::direct:
      if (s.copy_b) tag("copy_b");
      break;
    case Path::direct_rows:
      tag(s.nchunks > 1 ? "chunks>1" : "one_chunk");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks;
      break;
    case Path::direct_k:
      tag(s.blk.tk > 1 ? "tk>1" : "tk=1");
      if (s.last_kb != s.blk.KC) tag("last_kb_longer");
      d << " tk=" << s.blk.tk << " npc=" << s.blk.npc << " KC=" << s.blk.KC
        << " last_kb=" << s.last_kb;
      break;
    case Path::skinny:
      tag(s.nchunks > 1 ? "chunks>1" : "one_chunk");
      tag(s.nkb == 1 ? "one_kblock" : s.nkb == 2 ? "two_kblocks" : "kblocks>2");
      if (s.nkb > 1 && s.kb <= 32) tag("page_apart_kblocks");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks << " kb=" << s.kb << " nkb=" << s.nkb;
      break;
    case Path::stream:
      if (s.column_as_row) tag("column_as_row");
      if (s.M > 1 && !s.column_as_row) tag("rows");
      tag(s.blk.tk > 1 ? "k_split" : "n_split");
      if (s.nchunks > 1) tag("chunks>1");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks << " tk=" << s.blk.tk;
      break;
    case Path::dot:
      tag(s.dot_over == DotOver::a_rows ? "a_rows" : "b_rows");
      tag("vecs=" + std::to_string(s.dot_vecs));
      if (s.dot_rest[1]) tag("rest_vecs=" + std::to_string(s.dot_rest[1]->desc.rows));
      if (s.nchunks > 1) tag("chunks>1");
      if (s.dot[0]) tag("blocks>1");
      if (s.dot[1]->desc.k_align) tag("k_align");
      d << " chunk=" << s.chunk << " nchunks=" << s.nchunks << " dot_block=" << s.dot_block;
      break;
    case Path::edge_split:
      tag(impl_of(*s.split_edge).dot[0] ? "edge_blocks>1" : "edge_one_block");
      break;
    case Path::transposed:
      tag(std::string("of_") + path_name(impl_of(*s.transposed_plan).path));
      tag(s.transposed_epilogue ? "epilogue" : "no_epilogue");
      tag("cols=" + std::to_string(s.N));
      break;
    case Path::packed: {
      const PackedBlocking& b = s.blk;
      tag(std::string("kc_rule=") + kc_rule_name(b.kc_rule));
      if (b.tk > 1) tag("k_split");
      if (b.rows_outer) tag("rows_outer");
      if (b.a_once)
        tag("a_once");
      else
        tag("mc_blocks>1");
      if (b.tm > 1) tag("split_m");
      if (b.tn > 1) tag("split_n");
      tag(b.npc == 1 ? "one_kblock" : b.npc == 2 ? "two_kblocks" : "kblocks>2");
      if (s.M % b.MR) tag("m_edge");
      if (s.N % b.NR) tag("n_edge");
      d << " MR=" << b.MR << " NR=" << b.NR << " tm=" << b.tm << " tn=" << b.tn << " tk=" << b.tk
        << " KC=" << b.KC << " npc=" << b.npc << " MC=" << b.MC << " NCP=" << b.NCP
        << " a_once=" << b.a_once << " rows_outer=" << b.rows_outer
        << " kc_rule=" << kc_rule_name(b.kc_rule);
      break;
    }
  }
  std::ostringstream full;
  full << "path=" << info.path << (s.column_as_row ? "(column_as_row)" : "") << d.str()
       << " kernels=";
  for (size_t i = 0; i < s.used.size(); ++i) full << (i ? "," : "") << s.used[i]->info.name;
  info.detail = full.str();
  return info;
}

// ----------------------------------------------------------------------------------------------
// Watchdog and crash reports: the running case's repro line.

std::mutex g_cur_mu;
std::string g_cur_repro;
char g_cur_buf[1024];
std::atomic<int64_t> g_case_start_ns{0};
std::atomic<int64_t> g_case_id{0};
double g_hang_abort_s = 300;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

void set_current(const std::string& s) {
  std::lock_guard<std::mutex> lock(g_cur_mu);
  g_cur_repro = s;
  const size_t n = std::min(s.size(), sizeof(g_cur_buf) - 2);
  std::memcpy(g_cur_buf, s.data(), n);
  g_cur_buf[n] = '\n';
  g_cur_buf[n + 1] = 0;
}

// A fault inside GemmPlan::make on the main thread (the planner's own arithmetic, before any
// kernel runs) is reported as a failure and the fuzzing goes on; anywhere else it ends the process.
sigjmp_buf g_make_jmp;
volatile sig_atomic_t g_in_make = 0;

// GemmPlan::make(...) into g_made; 0, or the signal it faulted with (g_made then empty). Only
// globals change between the sigsetjmp and a siglongjmp back to it.
std::shared_ptr<const GemmPlan> g_made;
[[gnu::noinline]] int make_guarded(const GemmProblem& p, Isa isa, int threads, bool prepacked,
                                   const CacheSizes& caches) {
  g_made.reset();
  if (const int sig = sigsetjmp(g_make_jmp, 1); sig != 0) return sig;
  g_in_make = 1;
  g_made = GemmPlan::make(p, isa, threads, prepacked, caches);
  g_in_make = 0;
  return 0;
}

void on_fatal_signal(int sig) {
  if (g_in_make) {
    g_in_make = 0;
    siglongjmp(g_make_jmp, sig);
  }
  const char head[] = "\nFATAL SIGNAL while running: --repro='";
  ssize_t ignored = write(2, head, sizeof(head) - 1);
  ignored = write(2, g_cur_buf, strnlen(g_cur_buf, sizeof(g_cur_buf)));
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void watchdog() {
  int64_t warned = -1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int64_t start = g_case_start_ns.load(), id = g_case_id.load();
    if (start == 0) continue;
    const double s = double(now_ns() - start) * 1e-9;
    if (s > 5 && warned != id) {
      warned = id;
      std::lock_guard<std::mutex> lock(g_cur_mu);
      std::fprintf(stderr, "HANG? case %lld running %.1f s: --repro='%s'\n", (long long)id, s,
                   g_cur_repro.c_str());
    }
    if (s > g_hang_abort_s) {
      std::lock_guard<std::mutex> lock(g_cur_mu);
      std::fprintf(stderr, "HANG: case running %.0f s, aborting: --repro='%s'\n", s,
                   g_cur_repro.c_str());
      std::fflush(stderr);
      std::_Exit(3);
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Running one case.

struct Totals {
  std::map<std::string, int64_t> cases_per_isa;
  std::map<std::string, int64_t> runs_per_isa;
  std::map<std::string, std::map<std::string, int64_t>> paths;    // isa -> path -> count
  std::map<std::string, std::map<std::string, int64_t>> tags;     // isa -> tag -> count
  std::map<std::string, std::map<std::string, int64_t>> recipes;  // recipe -> isa:path -> count
  int64_t failures = 0, slow = 0, header_cases = 0, fuzz_cases = 0;
  std::vector<std::string> failure_lines;
};

kiln::ThreadPool* pools[3] = {nullptr, nullptr, nullptr};
const char* const kPoolNames[] = {"pool1", "pool2", "pool3", "no_pool", "gemm_api"};

// Runs P on every ISA (or the one it names); returns whether all passed.
bool run_case(const Params& P, Totals& T, bool verbose) {
  bool ok = true;
  const bool header = header_case_fits(P);
  std::unique_ptr<Case> hc;
  std::unique_ptr<FuzzCase> fc;
  auto setup_repro = repro_string(P);
  set_current(setup_repro + "   [building operands]");
  if (header) {
    EpiKind e{Activation(P.act), P.bias, P.scale != 1.0f, P.residual, P.gate, P.col_scale};
    hc = std::make_unique<Case>(Shape{P.M, P.N, P.K}, Layout(P.a.kind), Layout(P.b.kind), e,
                                P.data_seed, P.c_pad);
    if (P.residual && P.r_pad == -1) hc->broadcast_residual_row();
    ++T.header_cases;
  } else {
    fc = std::make_unique<FuzzCase>(P);
    set_current(setup_repro + "   [reference]");
    fc->compute_reference();
    ++T.fuzz_cases;
  }
  for (Isa isa : supported_isas()) {
    if (!P.isa.empty() && P.isa != isa_name(isa)) continue;
    const std::string repro = repro_string(P, isa_name(isa));
    set_current(repro);
    const auto t0 = Clock::now();
    std::vector<std::string> bad;  // failing runs
    std::string plan_detail = "(no plan)";
    try {
      GemmProblem p = header ? hc->problem() : fc->problem();
      p.dynamic_m = P.dyn_m;
      p.dynamic_nk = P.dyn_nk;
      std::shared_ptr<const PackedB> packed;
      if (P.prepacked) packed = pack_b(p.b, P.K, P.N, isa);
      const int sig =
          make_guarded(p, isa, P.threads, P.prepacked, cache_choices()[size_t(P.caches)].caches);
      if (sig != 0) {
        bad.push_back(std::string("signal ") + strsignal(sig) + " in GemmPlan::make");
        throw std::runtime_error("GemmPlan::make faulted");
      }
      const std::shared_ptr<const GemmPlan> plan = std::move(g_made);
      PlanInfo info = describe(*plan);
      if (P.prepacked) info.tags.push_back(info.path + ":prepacked_b");
      if (P.dyn_m) info.tags.push_back(info.path + ":dynamic_m");
      if (P.dyn_nk) info.tags.push_back(info.path + ":dynamic_nk");
      if (P.threads > 3) info.tags.push_back(info.path + ":plan_threads>3");
      plan_detail = info.detail;
      ++T.cases_per_isa[isa_name(isa)];
      ++T.paths[isa_name(isa)][info.path];
      for (const std::string& t : info.tags) ++T.tags[isa_name(isa)][t];
      ++T.recipes[P.recipe][std::string(isa_name(isa)) + ":" + info.path];
      if (verbose) std::printf("  %s: %s\n", isa_name(isa), plan_detail.c_str());
      if (header && !P.prepacked) {
        // The header's check as it is: every pool, the worst of the four runs.
        const double w = worst_on_every_pool(*plan, *hc);
        T.runs_per_isa[isa_name(isa)] += 4;
        if (!(w <= 1.0)) {
          std::ostringstream o;
          o << "worst_on_every_pool " << w;
          // Which pool: rerun one by one.
          for (int i = 0; i < 4; ++i) {
            plan->run_on(hc->problem(), i < 3 ? pools[i] : nullptr);
            const double v = hc->max_violation();
            if (!(v <= 1.0)) o << "; " << kPoolNames[i] << " " << v;
          }
          bad.push_back(o.str());
        }
        if (P.api) {
          hc->run(*pools[1], isa);
          ++T.runs_per_isa[isa_name(isa)];
          const double v = hc->max_violation();
          if (!(v <= 1.0)) {
            std::ostringstream o;
            o << kPoolNames[4] << " " << v;
            bad.push_back(o.str());
          }
        }
      } else {
        for (int i = 0; i < 5; ++i) {
          if (i == 4 && !P.api) break;
          GemmProblem q = fc->problem();
          if (P.prepacked) q.b.data = nullptr;  // ignored with a PackedB
          if (i < 4) {
            q.dynamic_m = P.dyn_m;
            q.dynamic_nk = P.dyn_nk;
            plan->run_on(q, i < 3 ? pools[i] : nullptr, packed.get());
          } else if (P.prepacked) {
            gemm_prepacked(q, *packed, *pools[1]);
          } else {
            gemm(q, *pools[1], isa);
          }
          ++T.runs_per_isa[isa_name(isa)];
          const Violation v = fc->check();
          if (!(v.worst <= 1.0)) {
            std::ostringstream o;
            o << kPoolNames[i] << " " << v.worst << " (" << v.what << ")";
            bad.push_back(o.str());
          }
        }
      }
    } catch (const std::exception& e) {
      if (bad.empty() || std::string(e.what()) != "GemmPlan::make faulted")
        bad.push_back(std::string("exception: ") + e.what());
    }
    const double secs = seconds_since(t0);
    if (secs > 5) {
      ++T.slow;
      std::printf("SLOW %.1f s (hang suspect): --repro='%s' %s\n", secs, repro.c_str(),
                  plan_detail.c_str());
    }
    if (!bad.empty()) {
      ok = false;
      ++T.failures;
      std::ostringstream o;
      o << "FAIL [" << P.recipe << "] --repro='" << repro << "' | " << plan_detail << " |";
      for (const std::string& b : bad) o << " " << b << ";";
      std::printf("%s\n", o.str().c_str());
      std::fflush(stdout);
      if (T.failure_lines.size() < 200) T.failure_lines.push_back(o.str());
    }
  }
  return ok;
}

int64_t rss_mb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return int64_t(resident) * sysconf(_SC_PAGESIZE) / (1 << 20);
}

void print_summary(const Totals& T, double secs) {
  std::printf(
      "\n==== summary: %.0f s, %lld failures, %lld slow, %lld cases via testing::Case, "
      "%lld via FuzzCase; kernels generated %lld, RSS %lld MB\n",
      secs, (long long)T.failures, (long long)T.slow, (long long)T.header_cases,
      (long long)T.fuzz_cases, (long long)stats().kernels_generated, (long long)rss_mb());
  for (const auto& [isa, n] : T.cases_per_isa) {
    std::printf("%s: %lld cases, %lld runs\n", isa.c_str(), (long long)n,
                (long long)T.runs_per_isa.at(isa));
    std::printf("  paths:");
    for (const auto& [p, c] : T.paths.at(isa)) std::printf(" %s=%lld", p.c_str(), (long long)c);
    std::printf("\n  features:\n");
    for (const auto& [t, c] : T.tags.at(isa))
      std::printf("    %-32s %lld\n", t.c_str(), (long long)c);
  }
  std::printf("recipes (the draw's targets) -> paths taken:\n");
  for (const auto& [r, m] : T.recipes) {
    std::printf("  %-14s", r.c_str());
    for (const auto& [p, c] : m) std::printf(" %s=%lld", p.c_str(), (long long)c);
    std::printf("\n");
  }
  if (!T.failure_lines.empty()) {
    std::printf("\nfailures:\n");
    for (const std::string& l : T.failure_lines) std::printf("%s\n", l.c_str());
  }
  std::fflush(stdout);
}

// The check itself: runs that are right pass; a wrong element of C, a write just past a row of
// C (in its padding), before C or after it, and a modified input each fail.
int selftest() {
  int bad = 0;
  auto expect = [&](bool cond, const char* what) {
    std::printf("selftest: %-48s %s\n", what, cond ? "ok" : "NOT DETECTED / WRONG");
    bad += !cond;
  };
  for (Isa isa : supported_isas()) {
    // testing::Case (the header's check).
    {
      Case c({9, 21, 33}, Layout::padded, Layout::transposed,
             EpiKind{Activation::gelu, true, true, true}, 5, 3);
      auto plan = GemmPlan::make(c.problem(), isa, 2);
      expect(worst_on_every_pool(*plan, c) <= 1.0, "Case: a right run passes");
      auto& buf = const_cast<std::vector<float>&>(c.c_storage());
      const int64_t ldc = 21 + 3;
      plan->run_on(c.problem(), nullptr);
      buf[size_t(1 + 4 * ldc + 7)] += 1e-3f;
      expect(!(c.max_violation() <= 1.0), "Case: a wrong element fails");
      plan->run_on(c.problem(), nullptr);
      buf[size_t(1 + 4 * ldc + 21)] = 0;
      expect(!(c.max_violation() <= 1.0), "Case: a write in a row's padding fails");
    }
    // FuzzCase.
    Params P;
    P.M = 37, P.N = 45, P.K = 70, P.a = OpSpec{kCustom, 1024, 1}, P.b = OpSpec{kCustom, -50, 1};
    P.c_pad = 2, P.r_pad = -1, P.act = 4, P.bias = true, P.residual = true, P.scale = -1.5f;
    FuzzCase fc(P);
    fc.compute_reference();
    auto plan = GemmPlan::make(fc.problem(), isa, 2);
    auto run = [&] { plan->run_on(fc.problem(), pools[1]); };
    run();
    expect(fc.check().worst <= 1.0, "FuzzCase: a right run passes");
    const int64_t ldc = P.N + P.c_pad, off = fc.c_offset();
    struct Poke {
      int64_t at;
      const char* what;
    };
    for (Poke k : {Poke{off + 36 * ldc + 44, "FuzzCase: a wrong last element fails"},
                   Poke{off + 3 * ldc + P.N, "FuzzCase: a write in a row's padding fails"},
                   Poke{off - 1, "FuzzCase: a write before C fails"},
                   Poke{off + 36 * ldc + P.N, "FuzzCase: a write after C fails"}}) {
      run();
      fc.c_buffer()[size_t(k.at)] += 1e-3f;
      expect(!(fc.check().worst <= 1.0), k.what);
    }
    run();
    const_cast<float*>(fc.b_ref().data)[0] += 1.0f;
    expect(!(fc.check().worst <= 1.0), "FuzzCase: a modified input fails");
    const_cast<float*>(fc.b_ref().data)[0] -= 1.0f;
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("KILN_CACHE", "off", 0);  // kernels generated here, never from or to the disk cache
  double seconds = 60;
  uint64_t seed =
      uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) % 1000000007;
  bool verbose = false, selftest_only = false;
  std::string repro;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--seconds=", 0) == 0)
      seconds = std::stod(a.substr(10));
    else if (a.rfind("--seed=", 0) == 0)
      seed = std::stoull(a.substr(7));
    else if (a.rfind("--repro=", 0) == 0)
      repro = a.substr(8);
    else if (a.rfind("--hang=", 0) == 0)
      g_hang_abort_s = std::stod(a.substr(7));
    else if (a == "--verbose" || a == "-v")
      verbose = true;
    else if (a == "--selftest")
      selftest_only = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--seconds=N] [--seed=S] [--verbose] [--hang=S] | --repro='M=.. "
                   "N=.. ...' | --selftest\n",
                   argv[0]);
      return 2;
    }
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, on_fatal_signal);
  static kiln::ThreadPool pool1(1), pool2(2), pool3(3);
  pools[0] = &pool1, pools[1] = &pool2, pools[2] = &pool3;
  std::thread(watchdog).detach();

  const CacheSizes& hc = host_cpu().caches;
  std::printf("kiln_gemm_fuzz: isas");
  for (Isa isa : supported_isas()) std::printf(" %s", isa_name(isa));
  std::printf("; host caches l2=%lld l1d_ways=%lld l1d_way_bytes=%lld\n", (long long)hc.l2_bytes,
              (long long)hc.l1d_ways, (long long)hc.l1d_way_bytes);

  if (selftest_only) return selftest();
  Totals T;
  const auto start = Clock::now();
  if (!repro.empty()) {
    Params P;
    if (!parse_repro(repro, P)) {
      std::fprintf(stderr, "cannot parse --repro='%s'\n", repro.c_str());
      return 2;
    }
    P.recipe = "repro";
    std::printf("repro: %s (%s)\n", repro_string(P).c_str(),
                header_case_fits(P) ? "testing::Case" : "FuzzCase");
    const bool ok = run_case(P, T, true);
    std::printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }

  std::printf("seed %llu, %.0f s\n", (unsigned long long)seed, seconds);
  std::fflush(stdout);
  Draw d(seed);
  double last_progress = 0;
  int64_t n = 0;
  while (seconds_since(start) < seconds) {
    const Params P = draw(d);
    g_case_id.store(n);
    g_case_start_ns.store(now_ns());
    const auto t0 = Clock::now();
    run_case(P, T, verbose);
    const double secs = seconds_since(t0);
    g_case_start_ns.store(0);
    if (verbose)
      std::printf("case %lld [%s] %.3f s: %s\n", (long long)n, P.recipe.c_str(), secs,
                  repro_string(P).c_str());
    ++n;
    if (seconds_since(start) - last_progress > 30) {
      last_progress = seconds_since(start);
      std::printf("... %.0f s: %lld cases, %lld failures, %lld kernels, RSS %lld MB\n",
                  last_progress, (long long)n, (long long)T.failures,
                  (long long)stats().kernels_generated, (long long)rss_mb());
      std::fflush(stdout);
    }
  }
  print_summary(T, seconds_since(start));
  return T.failures ? 1 : 0;
}
