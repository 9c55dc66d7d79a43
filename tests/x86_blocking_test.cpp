// The packed path's blocking rules (blocking.h) for the caches of the machines they were measured
// on, whatever this host is, and GEMMs blocked for those caches checked against the reference:
// every KC rule runs here even where the host's own caches would never pick it.
#include "x86_gemm_testing.h"

#include <catch2/catch.hpp>

#include "codegen/x86/blocking.h"
#include "codegen/x86/gemm.h"
#include "codegen/x86/gemm_plan.h"
#include "jit/thread_pool.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace kiln::x86;
using namespace kiln::x86::testing;

namespace {

struct Machine {
  const char* name;
  CacheSizes caches;
};

// L2 per core of the machines the rules were measured on.
// (Zen cores: amd_zen; the Zen 1 splits 256-bit ops in two halves.)
const Machine kZen3{"zen3", {512 << 10, 8, 4096, false, 32 << 20, true}};
const Machine kZen5{"zen5", {1 << 20, 8, 4096, false, 32 << 20, true}};
const Machine kXeon{"xeon", {2 << 20}};
const Machine kZen1{"zen1", {512 << 10, 8, 4096, true, 8 << 20, true}};
const Machine kMachines[] = {kZen3, kZen5, kXeon, kZen1};

int64_t rows_per_task(const PackedBlocking& b) { return (b.mtiles + b.tm - 1) / b.tm * b.MR; }

// Plans c's problem for `caches` (every kernel packed), runs it on `pool` (B prepacked or
// packed per call) and returns the check against the reference.
double run_packed_plan(Case& c, Isa isa, int threads, bool prepacked, const CacheSizes& caches,
                       kiln::ThreadPool& pool) {
  const GemmProblem p = c.problem();
  auto plan = GemmPlan::make(p, isa, threads, prepacked, caches);
  for (const KernelInfo& k : plan->kernels()) CHECK(k.name.rfind("packed_", 0) == 0);
  if (prepacked) {
    auto packed = pack_b(c.b_ref(), p.K, p.N, isa);
    plan->run(p, pool, packed.get());
  } else {
    plan->run(p, pool);
  }
  return c.max_violation();
}

// Runs `plan` for c's problem with B prepacked on pools of 1-3 threads, or packed per call on
// every pool (worst_on_every_pool): the worst check against the reference.
double worst_prepacked_or_not(const GemmPlan& plan, Case& c, Isa isa, bool prepacked) {
  if (!prepacked) return worst_on_every_pool(plan, c);
  const GemmProblem p = c.problem();
  auto packed = pack_b(c.b_ref(), p.K, p.N, isa);
  double worst = 0;
  for (int threads : {1, 2, 3}) {
    kiln::ThreadPool pool(threads);
    plan.run(p, pool, packed.get());
    worst = std::max(worst, c.max_violation());
  }
  return worst;
}

}  // namespace

TEST_CASE("x86 blocking: the KC rules pick what was measured best on each machine",
          "[x86][blocking]") {
  // 2048^3 on 2 threads: KC 1024 where an eighth of L2 holds 32 rows of A at that KC, else 512
  // with MC from a quarter of L2 (a Zen 3's eighth holds 12 rows).
  const PackedBlocking zen3 = packed_blocking(2048, 2048, 2048, Isa::avx2, 2, false, kZen3.caches);
  CHECK(zen3.kc_rule == KcRule::standard);
  CHECK(zen3.KC == 512);
  CHECK(zen3.MC >= 48);
  CHECK(zen3.MC * zen3.KC * 4 <= kZen3.caches.l2_bytes / 4);
  CHECK_FALSE(zen3.a_once);
  // A Zen 1 (split_256): K blocks of at most 288 (blocking.cpp, kSplit256MaxKc), evenly split.
  const PackedBlocking zen1 = packed_blocking(2048, 2048, 2048, Isa::avx2, 2, false, kZen1.caches);
  CHECK(zen1.kc_rule == KcRule::standard);
  CHECK(zen1.KC == 256);
  CHECK(zen1.MC * zen1.KC * 4 <= kZen1.caches.l2_bytes / 4);
  CHECK(packed_blocking(274, 177, 2838, Isa::avx2, 1, false, kZen1.caches).KC == 284);
  CHECK(packed_blocking(198, 1456, 525, Isa::avx2, 2, false, kZen1.caches).KC == 264);
  for (const Machine& m : {kZen5, kXeon}) {
    INFO(m.name);
    const PackedBlocking b = packed_blocking(2048, 2048, 2048, Isa::avx512, 2, false, m.caches);
    CHECK(b.kc_rule == KcRule::long_k);
    CHECK(b.KC == 1024);
    CHECK(b.MC * b.KC * 4 <= m.caches.l2_bytes / 8);
  }
  // 128x4096x1024 on 2 threads (split over N): the 132 rows of a task do not fit a quarter of a
  // Zen 3's L2 at KC 512, and fit a third of it at KC 256: one MC block.
  const PackedBlocking lin = packed_blocking(128, 4096, 1024, Isa::avx2, 2, false, kZen3.caches);
  CHECK(lin.tm == 1);
  CHECK(lin.tn == 2);
  CHECK(lin.kc_rule == KcRule::one_block);
  CHECK(lin.a_once);
  CHECK(lin.KC >= 256);
  CHECK(lin.KC < 512);
  CHECK(rows_per_task(lin) * lin.KC * 4 <= kZen3.caches.l2_bytes / 3);
  // On a Xeon's 2 MiB the same rows fit a quarter at KC 512: nothing to shrink; with B prepacked
  // they fit a third at KC 1024.
  const PackedBlocking xeon = packed_blocking(128, 4096, 1024, Isa::avx512, 2, false, kXeon.caches);
  CHECK(xeon.kc_rule == KcRule::standard);
  CHECK(xeon.KC == 512);
  CHECK(xeon.a_once);
  const PackedBlocking pre = packed_blocking(128, 4096, 1024, Isa::avx512, 2, true, kXeon.caches);
  CHECK(pre.kc_rule == KcRule::short_k_1024);
  CHECK(pre.KC == 1024);
  // Too many rows to fit a third of L2 at KC 256: KC stays, several MC blocks.
  const PackedBlocking tall = packed_blocking(800, 64, 1024, Isa::avx2, 1, false, kZen3.caches);
  CHECK(tall.kc_rule == KcRule::standard);
  CHECK(tall.KC == 512);
  CHECK_FALSE(tall.a_once);
  // A few rows and B packed per call: on a Zen 3 KC shrinks to 128, so that the packed block of
  // half of L2 spans 512 columns; not with 2 MiB of L2, nor with B prepacked.
  const PackedBlocking few = packed_blocking(8, 4096, 1024, Isa::avx2, 1, false, kZen3.caches);
  CHECK(few.kc_rule == KcRule::few_rows);
  CHECK(few.KC == 128);
  CHECK(few.NCP * few.NR == 512);
  CHECK(packed_blocking(8, 4096, 1024, Isa::avx512, 1, false, kXeon.caches).KC == 512);
  CHECK(packed_blocking(8, 4096, 1024, Isa::avx2, 1, true, kZen3.caches).kc_rule !=
        KcRule::few_rows);
  // Up to 60 rows a task, KC shrinks so that the block spans 256 columns (on 2 threads too, each
  // task's 2048 columns); at 66 rows (64 rounded up to the 6-row tiles) it stays.
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    const PackedBlocking some =
        packed_blocking(48, 4096, 1024, Isa::avx2, threads, false, kZen3.caches);
    CHECK(some.kc_rule == KcRule::few_rows);
    CHECK(some.KC == 256);
    CHECK(some.NCP * some.NR == 256);
    CHECK(some.tk == 1);
    const PackedBlocking wider =
        packed_blocking(64, 4096, 1024, Isa::avx2, threads, false, kZen3.caches);
    CHECK(wider.kc_rule != KcRule::few_rows);
    CHECK(wider.KC == 512);
  }
  CHECK(packed_blocking(48, 4096, 1024, Isa::avx512, 2, false, kZen5.caches).KC == 512);
  // On the Zen 1 with B prepacked: K blocks of up to 1024 and one MC block while the task's A
  // block is within four L2s (1000^3 on 2 threads: 504 rows, 1.9 MiB), not past them (1024^3:
  // 516 rows, 2.0 MiB), nor with B packed per call. The Zen 3 (AVX2) the same where K is past
  // 512; not on the Xeon.
  for (const Shape& s : {Shape{128, 4096, 1024}, Shape{1000, 1000, 1000}, Shape{128, 4096, 1100}}) {
    INFO(s.M << "x" << s.N << "x" << s.K);
    for (const Machine& m : {kZen1, kZen3}) {
      INFO(m.name);
      const PackedBlocking pre = packed_blocking(s.M, s.N, s.K, Isa::avx2, 2, true, m.caches);
      CHECK(pre.kc_rule == KcRule::zen_prepacked);
      CHECK(pre.KC == (s.K == 1100 ? 552 : s.K));
      CHECK(pre.a_once);
    }
    CHECK(packed_blocking(s.M, s.N, s.K, Isa::avx2, 2, false, kZen1.caches).KC <= 288);
    CHECK(packed_blocking(s.M, s.N, s.K, Isa::avx2, 2, false, kZen3.caches).kc_rule !=
          KcRule::zen_prepacked);
    CHECK(packed_blocking(s.M, s.N, s.K, Isa::avx2, 2, true, kXeon.caches).kc_rule !=
          KcRule::zen_prepacked);
  }
  for (const Machine& m : {kZen1, kZen3}) {
    const PackedBlocking past = packed_blocking(1024, 1024, 1024, Isa::avx2, 2, true, m.caches);
    CHECK(past.kc_rule != KcRule::zen_prepacked);
    CHECK(past.KC <= (m.caches.split_256 ? 288 : 512));
  }
  // The Zen 3 keeps its K blocks where K is within 512 (512^3 lost 3-4% in one MC block), and
  // AVX-512 on a Zen keeps them.
  CHECK(packed_blocking(512, 512, 512, Isa::avx2, 2, true, kZen3.caches).kc_rule !=
        KcRule::zen_prepacked);
  CHECK(packed_blocking(128, 4096, 1024, Isa::avx512, 2, true, kZen5.caches).kc_rule !=
        KcRule::zen_prepacked);
  // K = 0 (C = the epilogue of zeros): one empty block, as under the other rules.
  const PackedBlocking empty = packed_blocking(943, 582, 0, Isa::avx2, 2, true, kZen1.caches);
  CHECK(empty.npc == 1);
  CHECK(empty.KC == 0);
  // Few enough rows for short_k_1024: that rule, as before.
  CHECK(packed_blocking(16, 4096, 1024, Isa::avx2, 2, true, kZen1.caches).kc_rule ==
        KcRule::short_k_1024);
}

TEST_CASE("x86 blocking: every blocking covers C and K once and respects its cache shares",
          "[x86][blocking]") {
  const int64_t dims[] = {1, 5, 6, 7, 16, 33, 128, 131, 300, 513, 1000, 1030, 2049, 5000};
  for (const Machine& m : kMachines) {
    for (Isa isa : {Isa::avx2, Isa::avx512}) {
      for (int threads : {1, 2, 3, 8}) {
        for (int64_t M : dims) {
          for (int64_t N : {int64_t(1), int64_t(17), int64_t(300), int64_t(4096)}) {
            for (int64_t K : dims) {
              for (bool prepacked : {false, true}) {
                const PackedBlocking b =
                    packed_blocking(M, N, K, isa, threads, prepacked, m.caches);
                INFO(m.name << " " << isa_name(isa) << " " << M << "x" << N << "x" << K
                            << " threads " << threads << " prepacked " << prepacked << " rule "
                            << kc_rule_name(b.kc_rule) << " KC " << b.KC << " MC " << b.MC);
                REQUIRE(b.tm >= 1);
                REQUIRE(b.tn >= 1);
                REQUIRE(b.tk >= 1);
                REQUIRE(b.tm * b.tn * b.tk <= threads);
                if (b.tk > 1) {  // K split: whole K blocks per task, each at least 512 deep
                  REQUIRE_FALSE(prepacked);
                  REQUIRE(b.tm * b.tn == 1);
                  REQUIRE(b.npc % b.tk == 0);
                  REQUIRE(K / b.tk >= 512);
                  REQUIRE((b.tk - 1) * M * N * 4 <= m.caches.l2_bytes);
                }
                REQUIRE(b.tn <= b.npanels);
                REQUIRE(b.KC % 4 == 0);
                REQUIRE(b.npc >= 1);
                REQUIRE(b.npc * b.KC >= K);
                REQUIRE((b.npc - 1) * b.KC < std::max<int64_t>(K, 1));  // no empty K block
                REQUIRE(b.KC <= (b.kc_rule == KcRule::long_k || b.kc_rule == KcRule::short_k_1024 ||
                                         b.kc_rule == KcRule::zen_prepacked
                                     ? 1024
                                     : 512));
                if (b.kc_rule == KcRule::zen_prepacked) {
                  REQUIRE(m.caches.amd_zen);
                  REQUIRE(prepacked);
                  REQUIRE(b.a_once);
                  REQUIRE(b.MC * b.KC * 4 <= 4 * m.caches.l2_bytes);
                }
                if (b.kc_rule == KcRule::few_rows) REQUIRE(b.KC >= 64);
                REQUIRE(b.MC >= b.MR);
                REQUIRE(b.MC % b.MR == 0);
                REQUIRE(b.NCP >= 1);
                REQUIRE(b.a_once == (b.MC >= rows_per_task(b)));
                REQUIRE(b.rows_outer == (b.tk == 1 && b.npc == 1 && K <= 128));
                // A's block in its share of L2 unless it is a single row tile.
                const int64_t share =
                    b.kc_rule == KcRule::long_k                                      ? 8
                    : b.kc_rule == KcRule::standard || b.kc_rule == KcRule::few_rows ? 4
                                                                                     : 3;
                if (b.MC > b.MR && b.kc_rule != KcRule::zen_prepacked)
                  REQUIRE(b.MC * b.KC * 4 <= m.caches.l2_bytes / share);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("x86 blocking: every micro-panel prefetches a stretch within the next B panel",
          "[x86][blocking]") {
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    const int64_t NR = packed_nr(isa);
    for (int64_t kc = 0; kc <= 1024; ++kc) {
      const int64_t panel = kc * NR;                     // floats
      const int64_t stretch = kc / kPackedUnrollK * 16;  // a line per unrolled K iteration
      std::set<int64_t> starts;
      // The driver's walk (BPrefetchWalk) gives the same offsets without dividing.
      BPrefetchWalk walk(kc, NR);
      // Up to 512 micro-panels of a tall block (MC up to 3000 rows).
      for (int64_t tile = 0; tile < 512; ++tile, walk.next()) {
        const int64_t at = b_prefetch_offset(tile, kc, NR);
        INFO(isa_name(isa) << " kc " << kc << " micro-panel " << tile << " offset " << at);
        REQUIRE(walk.offset() == at);
        REQUIRE(at >= 0);
        REQUIRE(at + stretch <= panel);
        starts.insert(at);
      }
      // The stretches of the first micro-panels cover the panel but for less than a stretch.
      if (stretch > 0) REQUIRE(int64_t(starts.size()) * stretch > panel - stretch);
    }
  }
}

TEST_CASE("x86 blocking: GEMMs blocked for other machines' caches match the reference",
          "[x86][blocking][gemm]") {
  // Shapes that reach every KC rule on one of the machines: several MC blocks with threads split
  // over M; one MC block at a shrunk KC (Zen 3; K within 512, so also with B prepacked, where a
  // longer K takes zen_prepacked); KC 1024 over five K blocks (Zen 5, Xeon); with B prepacked,
  // KC 1024 for few rows (Xeon), or up to 1024 in one MC block (Zens 1 and 3); a few rows with B
  // packed per call, KC shrunk (Zen 3) for a block of 512 columns (20 rows: 12 take the skinny
  // path) or of 256 (45 rows). Where x @ W.T would take the dot path (20 rows on AVX-512 or a Zen),
  // B stays row-major.
  const std::vector<Shape> shapes = {{700, 200, 1100}, {128, 1100, 1030}, {600, 64, 4200},
                                     {20, 1100, 300},  {45, 900, 700},    {150, 1100, 500}};
  kiln::ThreadPool pool1(1), pool2(2);
  std::set<KcRule> rules_seen;
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Machine& m : kMachines) {
      for (const Shape& s : shapes) {
        kiln::ThreadPool& pool = s.N <= 64 ? pool1 : pool2;
        const bool prepacked = variant % 3 == 1;
        const bool epi = variant % 2 == 0;
        const EpiKind e{epi ? Activation::silu : Activation::none, epi, false, epi};
        Layout lb = variant % 4 == 3 ? Layout::transposed : Layout::row_major;
        if (lb == Layout::transposed &&
            dot_path_for(Case(s, Layout::row_major, lb, e, 1).problem(), isa, prepacked, m.caches,
                         true) != DotOver::none)
          lb = Layout::row_major;
        Case c(s, Layout::row_major, lb, e, uint32_t(9100 + variant));
        const int threads = pool.num_threads();
        const PackedBlocking b = packed_blocking(s.M, s.N, s.K, isa, threads, prepacked, m.caches);
        rules_seen.insert(b.kc_rule);
        INFO(isa_name(isa) << " " << m.name << " " << s.M << "x" << s.N << "x" << s.K << " threads "
                           << threads << " prepacked " << prepacked << " rule "
                           << kc_rule_name(b.kc_rule) << " KC " << b.KC << " MC " << b.MC);
        // Every shape's B is over a fifth of every L2 here (600x64x4200, one column tile of the
        // direct kernels: over half): packed, not direct_rows.
        CHECK(run_packed_plan(c, isa, threads, prepacked, m.caches, pool) <= 1.0);
        ++variant;
      }
    }
  }
  if (!supported_isas().empty()) {
    CHECK(rules_seen.count(KcRule::standard));
    CHECK(rules_seen.count(KcRule::long_k));
    CHECK(rules_seen.count(KcRule::one_block));
    CHECK(rules_seen.count(KcRule::short_k_1024));  // Xeon, 128x1100x1030, prepacked
    CHECK(rules_seen.count(KcRule::few_rows));
    CHECK(rules_seen.count(KcRule::zen_prepacked));  // Zens 1 and 3, prepacked
  }
}

TEST_CASE("x86 blocking: B packed by the kernels of the first row tile matches the reference",
          "[x86][blocking][gemm]") {
  // On split-256 cores (the Zen 1's caches) B is read in place and packed by the first row
  // tile's call over each whole panel (blk.b_rs), where K is past the short-K order (rows_outer)
  // and not split; with several MC blocks, by the first block's calls. The edge panel, and on
  // AVX-512 each block's first panel (whose calls pack A), are packed before them. Row-major and
  // padded B (rows N + 7 apart, off a line); M with and without an edge tile, in one MC block and
  // several; N with and without an edge panel; K in one block and several; 1-3 threads (another
  // thread runs panels of a block in progress, packing them). Not on the Zen 3's caches.
  // (Smaller shapes take the direct paths.) AVX-512 runs a small C over a long K on direct_k
  // and few rows on the skinny path, where AVX2 packs: four shapes of its list differ (and give
  // it N without an edge panel: 288, 320 and 512 columns).
  const std::vector<Shape> shapes = {{40, 300, 200},  {35, 200, 700},  {40, 300, 500},
                                     {30, 100, 1000}, {20, 500, 300},  {100, 48, 800},
                                     {400, 200, 300}, {263, 333, 520}, {700, 400, 260}};
  const std::vector<Shape> shapes_avx512 = {{40, 300, 200},  {35, 320, 700},  {40, 300, 500},
                                            {60, 600, 1000}, {42, 512, 300},  {100, 288, 800},
                                            {400, 200, 300}, {263, 333, 520}, {700, 400, 260}};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    const int64_t NR = packed_nr(isa);
    bool packs_b_seen = false, blocks_seen = false;
    for (const Shape& s : isa == Isa::avx512 ? shapes_avx512 : shapes) {
      for (Layout lb : {Layout::row_major, Layout::padded}) {
        const EpiKind e = kEpilogueCycle[variant % 4];
        Case c(s, Layout::row_major, lb, e, uint32_t(9300 + variant++));
        const GemmProblem p = c.problem();
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " B " << layout_name(lb));
        auto plan = GemmPlan::make(p, isa, 2, false, kZen1.caches);
        bool packs_b = false, packed = true;
        for (const KernelInfo& k : plan->kernels()) {
          packs_b |= k.name.find("_packb" + std::to_string(p.b.row_stride)) != std::string::npos;
          packed &= k.name.rfind("packed_", 0) == 0;
        }
        CHECK(packed);
        const PackedBlocking b = packed_blocking(s.M, s.N, s.K, isa, 2, false, kZen1.caches);
        CHECK(packs_b == (s.N >= NR && !b.rows_outer && b.tk == 1));
        packs_b_seen |= packs_b;
        blocks_seen |= packs_b && !b.a_once;
        CHECK(worst_on_every_pool(*plan, c) <= 1.0);
        auto zen3 = GemmPlan::make(p, isa, 2, false, kZen3.caches);
        for (const KernelInfo& k : zen3->kernels())
          CHECK(k.name.find("_packb") == std::string::npos);
      }
    }
    CHECK(packs_b_seen);
    CHECK(blocks_seen);
  }
}

TEST_CASE("x86 blocking: a short K runs row tile -> panel, matching the reference",
          "[x86][blocking][gemm]") {
  // blocking.cpp, kRowsOuterMaxK: one K block of at most 128 walks C row tile by row tile.
  CHECK(packed_blocking(2000, 2000, 128, Isa::avx512, 2, false, kXeon.caches).rows_outer);
  CHECK(packed_blocking(4000, 4000, 32, Isa::avx512, 2, false, kXeon.caches).rows_outer);
  CHECK(packed_blocking(4000, 4000, 32, Isa::avx2, 1, true, kZen3.caches).rows_outer);
  CHECK_FALSE(packed_blocking(2000, 2000, 129, Isa::avx512, 2, false, kXeon.caches).rows_outer);
  CHECK_FALSE(packed_blocking(512, 512, 512, Isa::avx512, 2, false, kXeon.caches).rows_outer);
  // Edge tiles in both dimensions, several MC blocks (Zen 3's L2) and several column blocks,
  // every epilogue (and a column scale with a residual under GELU), B transposed or prepacked;
  // run on 1-3 threads (and inline where B is packed per call). Each row tile's whole panels go
  // in one call of a looping kernel (KernelDesc::panel_loop).
  const std::vector<Shape> shapes = {
      {700, 1100, 100}, {301, 1517, 37}, {1500, 1000, 128}, {40, 3000, 64}, {100, 20000, 3}};
  const EpiKind scaled{Activation::gelu, true, false, true, false, true};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Machine& m : {kZen3, kXeon}) {
      for (const Shape& s : shapes) {
        const bool prepacked = variant % 3 == 1;
        const Layout lb = variant % 4 == 3 ? Layout::transposed : Layout::row_major;
        const EpiKind e = variant % 5 == 4 ? scaled : kEpilogueCycle[variant % 4];
        Case c(s, Layout::row_major, lb, e, uint32_t(9300 + variant));
        const GemmProblem p = c.problem();
        INFO(isa_name(isa) << " " << m.name << " " << s.M << "x" << s.N << "x" << s.K
                           << " prepacked " << prepacked << " variant " << variant);
        CHECK(packed_blocking(s.M, s.N, s.K, isa, 2, prepacked, m.caches, lb == Layout::transposed)
                  .rows_outer);
        auto plan = GemmPlan::make(p, isa, 2, prepacked, m.caches);
        bool loops = false;
        for (const KernelInfo& k : plan->kernels()) {
          CHECK(k.name.rfind("packed_", 0) == 0);
          loops |= k.name.find("_loop") != std::string::npos;
        }
        CHECK(loops);
        CHECK(worst_prepacked_or_not(*plan, c, isa, prepacked) <= 1.0);
        ++variant;
      }
    }
  }
}

TEST_CASE(
    "x86 blocking: AVX-512 threads split M from four row tiles each where M is half of N, N from "
    "eight panels each where M <= N",
    "[x86][blocking][gemm]") {
  // blocking.cpp, kSplitMMinRowsPerCol, kSplitMMinTiles and kSplitNMinPanels.
  auto split = [](int64_t M, int64_t N, Isa isa, int threads) {
    const PackedBlocking b = packed_blocking(M, N, 256, isa, threads, false, kXeon.caches);
    return std::pair<int64_t, int64_t>(b.tm, b.tn);
  };
  using Split = std::pair<int64_t, int64_t>;
  CHECK(split(256, 256, Isa::avx512, 2) == Split(2, 1));
  CHECK(split(256, 480, Isa::avx512, 2) == Split(2, 1));  // 15 panels
  // kSplitNMinPanels: from 8 panels a thread where M <= N, N (a thread's A packed by its first
  // panel's kernels costs less than all of B).
  CHECK(split(256, 512, Isa::avx512, 2) == Split(1, 2));
  CHECK(split(512, 512, Isa::avx512, 2) == Split(1, 2));
  CHECK(split(2048, 2048, Isa::avx512, 2) == Split(1, 2));
  CHECK(split(513, 512, Isa::avx512, 2) == Split(2, 1));  // A bigger than B
  CHECK(split(512, 512, Isa::avx512, 3) == Split(3, 1));  // 16 panels: under 8 a thread
  CHECK(split(512, 512, Isa::avx2, 2) == Split(2, 1));    // AVX2: A packed by transposes
  CHECK(split(256, 513, Isa::avx512, 2) == Split(1, 2));  // M under half of N
  CHECK(split(112, 224, Isa::avx512, 2) == Split(2, 1));  // 8 row tiles: four a thread
  CHECK(split(98, 196, Isa::avx512, 2) == Split(1, 2));   // 7 row tiles
  CHECK(split(256, 256, Isa::avx512, 3) == Split(3, 1));  // 19 row tiles: six or seven a thread
  CHECK(split(130, 250, Isa::avx512, 3) == Split(1, 3));  // 10 row tiles over 3 threads
  CHECK(split(128, 256, Isa::avx2, 2) == Split(1, 2));    // AVX2: 22 row tiles, under 16 each
  CHECK(split(600, 600, Isa::avx2, 2) == Split(2, 1));    // 100 row tiles
  // Edge row tiles on one thread's share or both, 7 row tiles split over N; B transposed or
  // prepacked, every epilogue, on 2 and 3 threads (B over a fifth of the Xeon's L2, C too big for
  // direct_k: packed on either ISA).
  // 300x520x300: 17 panels split over N on 2 threads (9 and 8), over M on 3.
  const std::vector<Shape> shapes = {
      {130, 250, 500}, {250, 260, 500}, {98, 196, 700}, {300, 520, 300}};
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape& s : shapes) {
      for (int threads : {2, 3}) {
        const bool prepacked = variant % 3 == 1;
        const Layout lb = variant % 4 == 3 ? Layout::transposed : Layout::row_major;
        Case c(s, Layout::row_major, lb, kEpilogueCycle[variant % 4], uint32_t(9400 + variant));
        INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K << " threads " << threads
                           << " prepacked " << prepacked << " variant " << variant);
        kiln::ThreadPool pool(threads);
        CHECK(run_packed_plan(c, isa, threads, prepacked, kXeon.caches, pool) <= 1.0);
        ++variant;
      }
    }
  }
}

TEST_CASE("x86 blocking: AVX-512 kernels pack A over each block's first column panel",
          "[x86][blocking][gemm]") {
  const std::vector<Isa> isas = supported_isas();
  if (std::find(isas.begin(), isas.end(), Isa::avx512) == isas.end()) {
    std::fprintf(stderr, "skipped: the AVX-512 kernels do not run on this host\n");
    return;
  }
  // Which plans read A in place (gemm_driver.cpp, blk.a_rs): AVX-512 and A's columns unit-stride.
  auto packs_a = [](Case& c, Isa isa) {
    auto plan = GemmPlan::make(c.problem(), isa, 2, false, kXeon.caches);
    int n = 0;
    for (const KernelInfo& k : plan->kernels()) n += k.name.find("_packa") != std::string::npos;
    return n;
  };
  Case row_major({512, 512, 512}, Layout::row_major, Layout::row_major, {}, 9500);
  Case padded({512, 512, 512}, Layout::padded, Layout::row_major, {}, 9501);
  Case transposed({512, 512, 512}, Layout::transposed, Layout::row_major, {}, 9502);
  Case strided({512, 512, 512}, Layout::strided, Layout::row_major, {}, 9503);
  CHECK(packs_a(row_major, Isa::avx512) > 0);
  CHECK(packs_a(padded, Isa::avx512) > 0);
  CHECK(packs_a(transposed, Isa::avx512) == 0);
  CHECK(packs_a(strided, Isa::avx512) == 0);
  if (std::find(isas.begin(), isas.end(), Isa::avx2) != isas.end())
    CHECK(packs_a(row_major, Isa::avx2) == 0);
  // Every walk over A's blocks: one block reused by several column blocks (Xeon: a_once),
  // several MC blocks (Zen 3), several K blocks with K's remainder under the unroll, row tile ->
  // panel (K <= 128), a K split; edge tiles in both dimensions; A row-major or with padded rows;
  // every epilogue, B transposed or prepacked; on 1-3 threads and inline.
  const std::vector<Shape> shapes = {{517, 333, 701}, {700, 1100, 101}, {700, 200, 1103},
                                     {45, 900, 703},  {600, 64, 4203},  {29, 5000, 130}};
  int variant = 0;
  for (const Machine& m : {kZen3, kXeon}) {
    for (const Shape& s : shapes) {
      const bool prepacked = variant % 3 == 1;
      const Layout la = variant % 2 ? Layout::padded : Layout::row_major;
      const Layout lb = variant % 4 == 3 ? Layout::transposed : Layout::row_major;
      Case c(s, la, lb, kEpilogueCycle[variant % 4], uint32_t(9510 + variant));
      const GemmProblem p = c.problem();
      INFO(m.name << " " << s.M << "x" << s.N << "x" << s.K << " prepacked " << prepacked
                  << " variant " << variant);
      auto plan = GemmPlan::make(p, Isa::avx512, 2, prepacked, m.caches);
      int packing = 0;
      for (const KernelInfo& k : plan->kernels()) {
        CHECK(k.name.rfind("packed_", 0) == 0);
        packing += k.name.find("_packa" + std::to_string(p.a.row_stride)) != std::string::npos;
      }
      CHECK(packing > 0);
      CHECK(worst_prepacked_or_not(*plan, c, Isa::avx512, prepacked) <= 1.0);
      ++variant;
    }
  }
  // A plan run on an A with other strides than its own (against GemmPlan::run's contract) is an
  // error, not a read past A's rows.
  auto plan = GemmPlan::make(padded.problem(), Isa::avx512, 2, false, kXeon.caches);
  kiln::ThreadPool pool(2);
  CHECK_THROWS_WITH(plan->run(row_major.problem(), pool), Catch::Contains("run on rows 512 apart"));
  CHECK_THROWS_WITH(plan->run(transposed.problem(), pool), Catch::Contains("columns 512 apart"));
  CHECK(row_major.max_violation() > 1.0);  // C still holds the sentinel: nothing computed
  CHECK(worst_on_every_pool(*plan, padded) <= 1.0);
}

TEST_CASE(
    "x86 blocking: short rows of work split M over the threads, and small symbolic "
    "problems keep to one",
    "[x86][blocking][gemm]") {
  // blocking.cpp, kSplitNMaxRowWork: where a thread's columns times K is at most 8192 and every
  // thread gets a row tile, M is split (split over N, the threads share a line of each row of a
  // C off its lines).
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    INFO(isa_name(isa));
    for (const Shape s : std::vector<Shape>{{64, 64, 64}, {96, 96, 96}, {16, 64, 64}}) {
      INFO(s.M << "x" << s.N << "x" << s.K);
      const PackedBlocking b = packed_blocking(s.M, s.N, s.K, isa, 2, false, kXeon.caches);
      CHECK(b.tm == 2);
      CHECK(b.tn == 1);
    }
    // Past the bound, N splits as before: 48x128x256 (64 columns x 256 a thread), 64x4096x64.
    CHECK(packed_blocking(48, 128, 256, isa, 2, false, kXeon.caches).tn == 2);
    CHECK(packed_blocking(64, 4096, 64, isa, 2, false, kXeon.caches).tn == 2);
  }
  // One panel (AVX-512: N up to 32) and too few row tiles: nothing to split that way.
  const PackedBlocking one = packed_blocking(32, 32, 32, Isa::avx512, 2, false, kXeon.caches);
  CHECK(one.tm * one.tn == 1);
  CHECK(packed_blocking(10, 64, 64, Isa::avx512, 2, false, kXeon.caches).tm == 1);

  // gemm_driver.cpp, kPackedSplitMaxVolume: symbolic dims up to 128 Ki multiply-adds run the
  // packed path on the calling thread; an exact problem that small runs direct kernels. Each
  // against the reference on every pool, C off its lines (Case's C starts one float in).
  int variant = 0;
  for (Isa isa : supported_isas()) {
    for (const Shape s : std::vector<Shape>{{16, 64, 64},
                                            {48, 48, 48},
                                            {23, 57, 91},
                                            {32, 64, 64},
                                            {64, 64, 64},
                                            {96, 96, 96},
                                            {64, 128, 64},
                                            {10, 64, 64}}) {
      Case c(s, Layout::row_major, Layout::row_major, kEpilogueCycle[variant % 4],
             uint32_t(9700 + variant));
      GemmProblem p = c.problem();
      p.dynamic_m = p.dynamic_nk = true;
      auto plan = GemmPlan::make(p, isa, 2);
      INFO(isa_name(isa) << " " << s.M << "x" << s.N << "x" << s.K);
      for (const KernelInfo& k : plan->kernels()) CHECK(k.name.rfind("packed_", 0) == 0);
      CHECK(plan->caller_only() == (s.M * s.N * s.K <= 128 * 1024));
      CHECK(worst_on_every_pool(*plan, c) <= 1.0);
      ++variant;
    }
  }
}
