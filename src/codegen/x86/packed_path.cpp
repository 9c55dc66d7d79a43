// The packed path's kernels and run (gemm_driver.cpp plans it, blocking.cpp blocks it): each task
// owns a block of C and packs its blocks of A and B privately, then runs the microkernel over
// (B panel, A micro-panel) pairs; a thread whose tasks are done runs column panels of the blocks
// still in progress (panel_share.h).
#include "codegen/x86/cpu_info.h"
#include "codegen/x86/gemm_plan.h"
#include "codegen/x86/pack.h"
#include "codegen/x86/panel_share.h"
#include "support/check.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace kiln::x86 {

namespace {

// One block's panels in the packed path, as another thread runs them (panel_share.h): columns
// [jc, jc_end) in panels, rows [i0, i0 + mc), K block pc (k0, kc) with A's block packed at a and
// B's at b (nullptr: a PackedB), into c (rows ldc apart); acc: add to C, last: the last K block.
struct SharedPanels {
  int64_t jc = 0, jc_end = 0, pc = 0, i0 = 0, mc = 0, k0 = 0, kc = 0, ldc = 0;
  float* a = nullptr;  // written only by the owner's first panel (a_in_kernel)
  float* b = nullptr;  // written by the first row tile's calls where b_fresh
  float* c = nullptr;
  int acc = 0, last = 0;
  bool b_fresh = false;  // B's panels are packed by the first row tile's calls (b_in_kernel)
};

// How long a thread with no task left waits for a panel to claim before it leaves: longer than
// an owner takes to pack its next block of B (128x4096x1024: 1 MiB blocks, about 100 us).
constexpr std::chrono::nanoseconds kHelpPatience = std::chrono::microseconds{300};

}  // namespace

void GemmPlan::Impl::use_packed(const KernelDesc& base, int acc, int last) {
  const int64_t m_edge = M % blk.MR, n_edge = N % blk.NR;
  for (int me = 0; me < 2; ++me) {
    if (me ? !m_edge : M < blk.MR) continue;
    for (int ne = 0; ne < 2; ++ne) {
      if (ne ? !n_edge : N < blk.NR) continue;
      KernelDesc d = base;
      d.kind = KernelKind::packed;
      d.MR = blk.MR;
      d.NR = blk.NR;
      d.rows = me ? m_edge : blk.MR;
      d.cols = ne ? n_edge : blk.NR;
      d.accumulate = acc;
      d.last = last;
      if (!last) d.has_bias = d.has_scale = d.act = d.has_residual = d.has_col_scale = 0;
      kern[acc][last][me][ne] = use(d);
      d.a_rs = blk.a_rs;
      if (blk.a_rs) kern_packa[acc][last][me][ne] = use(d);
      d.a_rs = 0;
      d.b_rs = blk.b_rs;
      if (blk.b_rs && !ne) kern_packb[acc][last][me] = use(d);
      d.b_rs = 0;
      d.panel_loop = 1;
      if (blk.rows_outer && !ne && N >= 2 * blk.NR) kern_loop[acc][last][me] = use(d);
    }
  }
}

void GemmPlan::Impl::run_packed(const GemmProblem& p, ThreadPool* pool,
                                const PackedB* packed) const {
  const int64_t MR = blk.MR, NR = blk.NR, mtiles = blk.mtiles, npanels = blk.npanels, tm = blk.tm,
                tn = blk.tn, KC = blk.KC, npc = blk.npc, MC = blk.MC, NCP = blk.NCP, tk = blk.tk;
  const float* bpacked = nullptr;
  if (packed) {
    KILN_CHECK(packed->K() == K && packed->N() == N && packed->panel_width() == NR &&
               packed->isa() == isa)
        << "PackedB is " << packed->K() << "x" << packed->N() << " for " << isa_name(packed->isa())
        << ", the problem needs " << K << "x" << N << " for " << isa_name(isa);
    bpacked = packed->data();
  }
  const int64_t ldr = p.epi.ld_residual;
  // A packed by the kernels of the first panel over each block (blk.a_rs, baked into them).
  const bool a_in_kernel = blk.a_rs > 0;
  KILN_CHECK(!a_in_kernel || (p.a.row_stride == blk.a_rs && p.a.col_stride == 1))
      << "GemmPlan for A's rows " << blk.a_rs << " apart (unit columns) run on rows "
      << p.a.row_stride << " apart, columns " << p.a.col_stride << " apart";
  // B packed by the kernels of the first row tile over each whole panel (blk.b_rs, baked into
  // them), where it is not prepacked; the others (the edge panel, and a block's first panel where
  // its calls pack A) by pack_b_block.
  const bool b_in_kernel = blk.b_rs > 0 && !bpacked;
  KILN_CHECK(!b_in_kernel || (p.b.row_stride == blk.b_rs && p.b.col_stride == 1))
      << "GemmPlan for B's rows " << blk.b_rs << " apart (unit columns) run on rows "
      << p.b.row_stride << " apart, columns " << p.b.col_stride << " apart";
  // K split: task kt > 0 sums its K blocks into partial buffer kt - 1 (M x N, rows N apart).
  float* partials =
      tk > 1 ? thread_scratch(ScratchSlot::k_partial, size_t((tk - 1) * M * N)) : nullptr;
  const int64_t ntasks = tm * tn * tk;
  // Panels shared with threads whose tasks are done (panel_share.h); not where row tiles run
  // outermost (each panel's calls then spread over the whole block).
  std::unique_ptr<PanelShare<SharedPanels>[]> shares;
  if (pool && pool->num_threads() > 1 && ntasks > 1 && !blk.rows_outer)
    shares = std::make_unique<PanelShare<SharedPanels>[]>(size_t(ntasks));
  parallel(pool, ntasks, [&](int64_t begin, int64_t end) {
    float* abuf = thread_scratch(ScratchSlot::a_block, size_t(std::max<int64_t>(MC * KC, 1)));
    float* bbuf = bpacked ? nullptr
                          : thread_scratch(ScratchSlot::b_packed,
                                           size_t(std::max<int64_t>(NCP * KC * NR, 1)));
    KernelArgs args{};
    args.ldr_bytes = ldr * 4;
    args.scale = p.epi.scale;
    // The task's C (p.c, or its partial buffer) and its first K block.
    float* c = p.c;
    int64_t ldc = p.ldc, pc_first = 0;
    PanelShare<SharedPanels>* share = nullptr;  // the task's, when shared
    auto panel = [&](const SharedPanels& s, int64_t q) {
      return bpacked ? bpacked + q * K * NR + s.pc * KC * NR : s.b + (q - s.jc) * s.kc * NR;
    };
    auto tile = [&](const SharedPanels& s, int64_t ir, int64_t jp) {
      return s.c + (s.i0 + ir) * s.ldc + jp * NR;
    };
    // The arguments of a call over row tile ir from panel jp of s on, told the next call's B
    // stretch and C tile.
    auto set_args = [&](const SharedPanels& s, int64_t ir, int64_t jp, const float* b_next,
                        const float* c_next) {
      const int64_t j0 = jp * NR;
      args.kc = s.kc;
      args.ldc_bytes = s.ldc * 4;
      set_columns(args, p.epi, j0);
      args.residual = p.epi.residual ? p.epi.residual + (s.i0 + ir) * ldr + j0 : nullptr;
      args.b_next = b_next;
      args.c_next = c_next;
    };
    // The kernel over row tile ir and panel jp of s; a_fresh: the call packs A's micro-panel (the
    // first panel of a block, a_in_kernel); else the first row tile over a whole panel packs B's
    // panel where s.b_fresh.
    auto call = [&](const SharedPanels& s, int64_t ir, int64_t jp, const float* b_next,
                    const float* c_next, bool a_fresh) {
      const int64_t j0 = jp * NR;
      set_args(s, ir, jp, b_next, c_next);
      const int me = s.mc - ir < MR, ne = N - j0 < NR;
      if (s.b_fresh && ir == 0 && !ne && !a_fresh) {
        args.b_pack = s.b + (jp - s.jc) * s.kc * NR;
        kern_packb[s.acc][s.last][me]->fn(&args, s.a, p.b.data + s.k0 * blk.b_rs + j0,
                                          tile(s, 0, jp));
        return;
      }
      if (a_fresh) {
        args.a_pack = s.a + ir * s.kc;
        kern_packa[s.acc][s.last][me][ne]->fn(&args, p.a.data + (s.i0 + ir) * blk.a_rs + s.k0,
                                              panel(s, jp), tile(s, ir, jp));
        return;
      }
      kern[s.acc][s.last][me][ne]->fn(&args, s.a + ir * s.kc, panel(s, jp), tile(s, ir, jp));
    };
    // Panel jp of s over all its row tiles, each micro-panel prefetching a stretch of the next
    // panel (b_prefetch_offset, walked by BPrefetchWalk). The calls that pack (all of them where
    // a_fresh; the first where B's panel is fresh) go through `call`; the others in a loop that
    // sets the panel's arguments once and steps A, C and the residual along in registers: per
    // call, `call` reloads the plan's and the block's fields through the closures (after a
    // kernel's K loop has pushed them out of L1; 2% of 2048^3's samples were its loads).
    // AMD EPYC Zen 3, paired plans against a `call` per row tile, 2 threads: 300^3 1.06x,
    // 32x768x768 1.05x, 16x1024x1024 1.04x, 24x4096x1024 1.00-1.04x, 2048^3 1.02-1.03x,
    // 128x4096x1024 1.02x (B prepacked 1.01x), 48x4096x1024 1.01x, 512^3 1.01x (one thread
    // 1.02x).
    auto run_panel = [&](const SharedPanels& s, int64_t jp, bool a_fresh) {
      const int64_t mc = s.mc, kc = s.kc, ldc_s = s.ldc;
      const int ne = N - jp * NR < NR;
      const float* const next = panel(s, jp + 1 < s.jc_end ? jp + 1 : jp);
      float* const c_after = jp + 1 < s.jc_end ? tile(s, 0, jp + 1) : nullptr;
      BPrefetchWalk prefetch(s.kc, NR);
      // The C tile the call over row tile ir prefetches for the call after it (its own after
      // the block's last).
      auto c_next = [&](int64_t ir, float* c_ir) {
        return ir + MR < mc ? c_ir + MR * ldc_s : c_after ? c_after : c_ir;
      };
      const int64_t packing_end = a_fresh ? mc : s.b_fresh && !ne ? std::min(MR, mc) : 0;
      int64_t ir = 0;
      for (; ir < packing_end; ir += MR, prefetch.next())
        call(s, ir, jp, next + prefetch.offset(), c_next(ir, tile(s, ir, jp)), a_fresh);
      if (ir >= mc) return;
      set_args(s, ir, jp, nullptr, nullptr);
      const float* const b = panel(s, jp);
      const float* a = s.a + ir * kc;
      float* c = tile(s, ir, jp);
      const int64_t whole_end = mc - mc % MR;
      if (ir < whole_end) {
        const KernelFn whole = kern[s.acc][s.last][0][ne]->fn;
        for (; ir < whole_end; ir += MR, prefetch.next()) {
          args.b_next = next + prefetch.offset();
          args.c_next = c_next(ir, c);
          whole(&args, a, b, c);
          a += MR * kc;
          c += MR * ldc_s;
          if (args.residual) args.residual += MR * ldr;
        }
      }
      if (ir < mc) {
        args.b_next = next + prefetch.offset();
        args.c_next = c_next(ir, c);
        kern[s.acc][s.last][1][ne]->fn(&args, a, b, c);
      }
    };
    // Kernels over column panels [jc, jc_end) and rows [i0, i0 + mc) for K block pc, with A's
    // block packed in abuf and B's in bbuf (or the PackedB): panel -> row tile, or row tile ->
    // panel (blk.rows_outer). Each call is told the next one's C tile (its own after the last).
    // a_fresh: A's block is not packed yet (a_in_kernel): the calls over the first panel pack it.
    // b_fresh: B's block is not packed yet where b_in_kernel (the first of several MC blocks).
    auto compute = [&](int64_t jc, int64_t jc_end, int64_t pc, int64_t i0, int64_t mc, bool a_fresh,
                       bool b_fresh) {
      SharedPanels s;
      s.b_fresh = b_in_kernel && b_fresh;
      s.jc = jc, s.jc_end = jc_end, s.pc = pc, s.i0 = i0, s.mc = mc;
      s.k0 = pc * KC, s.kc = std::max<int64_t>(0, std::min(KC, K - s.k0));
      s.a = abuf, s.b = bbuf, s.c = c, s.ldc = ldc;
      s.acc = pc > pc_first, s.last = tk == 1 && pc == npc - 1;
      if (blk.rows_outer) {
        // After the first row tile B's block is in L2 (or L1) for the others. Each call is told
        // the next one's B panel and C tile; a row tile's whole panels (but one packing A) go in
        // one call where there are two or more (kern_loop): a call over a short K is a few
        // hundred FMA cycles, and the driver's per-call work held 10% of 2048x2048x32's samples.
        // AMD EPYC Zen 1, paired plans against a call per panel, 2 threads: 1024x1024x8 1.35x,
        // 2048x2048x32 1.12x, 4096x4096x64 1.05x, 1000x1000x64 1.05x, 64x4096x64 1.05x,
        // 2000x2000x128 1.02x, 512x512x16 1.00x; B prepacked with bias and GELU 1000x1000x64
        // 1.03x, 2048x2048x32 1.01x; one thread 2048x2048x32 1.10x, 1000x1000x64 1.05x. (The
        // looping kernel takes B's panels kc x NR apart: so they are, packed per call or, with
        // the one K block of rows_outer, prepacked.)
        const int64_t whole_end = std::min(jc_end, N / NR);
        for (int64_t ir = 0; ir < mc; ir += MR) {
          auto next_b = [&](int64_t jp) { return panel(s, jp + 1 < jc_end ? jp + 1 : jc); };
          auto next_c = [&](int64_t jp) {
            return jp + 1 < jc_end ? tile(s, ir, jp + 1)
                   : ir + MR < mc  ? tile(s, ir + MR, jc)
                                   : tile(s, ir, jp);
          };
          int64_t jp = jc;
          if (a_fresh) call(s, ir, jp, next_b(jp), next_c(jp), true), ++jp;
          const Kernel* loop = kern_loop[s.acc][s.last][mc - ir < MR];
          if (loop && whole_end - jp >= 2) {
            set_args(s, ir, jp, next_b(whole_end - 1), next_c(whole_end - 1));
            args.panels = whole_end - jp;
            loop->fn(&args, s.a + ir * s.kc, panel(s, jp), tile(s, ir, jp));
            jp = whole_end;
          }
          for (; jp < jc_end; ++jp) call(s, ir, jp, next_b(jp), next_c(jp), false);
        }
        return;
      }
      int64_t first = 0;
      if (a_fresh) run_panel(s, jc, true), first = 1;
      if (!share) {
        for (int64_t jp = jc + first; jp < jc_end; ++jp) run_panel(s, jp, false);
        return;
      }
      share->run_block(s, first, jc_end - jc,
                       [&](const SharedPanels& b, int64_t q) { run_panel(b, b.jc + q, false); });
    };
    // a_fresh: the block's first panel is run by the calls that pack A (b_in_kernel packs it here).
    auto pack_b = [&](int64_t jc, int64_t jc_end, int64_t pc, bool a_fresh) {
      if (bpacked) return;
      const int64_t k0 = pc * KC, kc = std::max<int64_t>(0, std::min(KC, K - k0));
      const MatrixRef brows{p.b.data + k0 * p.b.row_stride, p.b.row_stride, p.b.col_stride};
      auto pack_panels = [&](int64_t q0, int64_t q1) {
        pack_b_block(brows, kc, q0 * NR, std::min(N, q1 * NR) - q0 * NR, NR,
                     bbuf + (q0 - jc) * kc * NR);
      };
      if (!b_in_kernel) return pack_panels(jc, jc_end);
      if (a_fresh) pack_panels(jc, jc + 1);
      if (jc_end * NR > N && (jc_end - 1 > jc || !a_fresh)) pack_panels(jc_end - 1, jc_end);
    };
    auto pack_a = [&](int64_t pc, int64_t i0, int64_t mc) {
      if (a_in_kernel) return;
      const int64_t k0 = pc * KC, kc = std::max<int64_t>(0, std::min(KC, K - k0));
      pack_a_block(p.a, i0, mc, k0, kc, MR, abuf);
    };
    for (int64_t t = begin; t < end; ++t) {
      const int64_t kt = t % tk, ti = t / tk / tn, tj = t / tk % tn;
      const int64_t pc0 = kt * npc / tk, pc1 = (kt + 1) * npc / tk;
      c = kt == 0 ? p.c : partials + (kt - 1) * M * N;
      ldc = kt == 0 ? p.ldc : N;
      pc_first = pc0;
      const int64_t r0 = ti * mtiles / tm * MR, r1 = std::min(M, (ti + 1) * mtiles / tm * MR);
      const int64_t q0 = tj * npanels / tn, q1 = (tj + 1) * npanels / tn;
      if (r0 >= r1) continue;
      share = shares ? &shares[t] : nullptr;
      if (share) share->open();
      if (blk.a_once) {
        // K block -> column block: each C tile still sees its K blocks in order.
        for (int64_t pc = pc0; pc < pc1; ++pc) {
          pack_a(pc, r0, r1 - r0);
          for (int64_t jc = q0; jc < q1; jc += NCP) {
            const int64_t jc_end = std::min(q1, jc + NCP);
            pack_b(jc, jc_end, pc, a_in_kernel && jc == q0);
            compute(jc, jc_end, pc, r0, r1 - r0, a_in_kernel && jc == q0, /*b_fresh=*/true);
          }
        }
      } else {
        for (int64_t jc = q0; jc < q1; jc += NCP) {
          const int64_t jc_end = std::min(q1, jc + NCP);
          for (int64_t pc = pc0; pc < pc1; ++pc) {
            pack_b(jc, jc_end, pc, a_in_kernel);
            for (int64_t i0 = r0; i0 < r1; i0 += MC) {
              const int64_t mc = std::min(MC, r1 - i0);
              pack_a(pc, i0, mc);
              compute(jc, jc_end, pc, i0, mc, a_in_kernel, i0 == r0);
            }
          }
        }
      }
      if (share) share->close();
    }
    if (shares)
      help_open_shares(
          shares.get(), ntasks,
          [&](const SharedPanels& b, int64_t q) { run_panel(b, b.jc + q, false); }, kHelpPatience);
  });
  if (tk > 1) reduce_k_split(p, partials, pool);
}

}  // namespace kiln::x86
