// The BLIS microkernel generator: C[rows x cols] (+)= Apanel[kc][MR] * Bpanel[kc][NR], with the
// epilogue on the last K block. Accumulators stay in registers for the whole K loop (unrolled 4x);
// edge tiles are separate kernels with fewer row registers and masked column stores (on AVX2 those
// of fewer columns than rows run their K loop on A's rows as one vector: `narrow` below).
#include "codegen/x86/generators.h"
#include "codegen/x86/vec_emit.h"
#include "support/check.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kiln::x86 {

namespace {

constexpr int kUnroll = kPackedUnrollK;
constexpr int kBPrefetchSteps = 16;
// The widest edge tile the narrow K loop takes (its column vectors spill to the 128-byte red
// zone, 32 bytes each, to be transposed into rows).
constexpr int kNarrowMaxCols = 4;

int32_t arg(size_t offset) { return static_cast<int32_t>(offset); }

}  // namespace

void emit_packed_kernel(ax::Assembler& a, const KernelDesc& d) {
  const bool avx512 = d.isa == int64_t(Isa::avx512);
  const ax::Gp args = ax::rdi, ra = ax::rsi, rb = ax::rdx, rc = ax::rcx, cnt = ax::r8, rem = ax::r9,
               res = ax::r10, bias = ax::r11, cbase = ax::rax;
  VecEmitter v(a, avx512, cbase);
  const int vl = v.lanes();
  const int mr = int(d.rows);
  const int nv = int((d.cols + vl - 1) / vl);
  const int last_n = int(d.cols - (nv - 1) * vl);
  const int nacc = mr * nv;
  KILN_CHECK(mr >= 1 && mr <= d.MR && d.cols >= 1 && d.cols <= d.NR) << d.name();
  KILN_CHECK(nacc + 4 <= v.num_regs() && nacc + nv + 1 <= v.num_regs()) << d.name();
  KILN_CHECK(d.a_rs >= 0 && d.a_rs <= kPackedMaxARowStride) << d.name();
  KILN_CHECK(d.b_rs >= 0 && d.b_rs <= kPackedMaxBRowStride && !(d.a_rs && d.b_rs)) << d.name();
  // AVX-512: with one column vector the A element is a {1to16} operand of the FMA itself. With
  // two, a register broadcast loads it once instead of once per FMA (at 14 rows the embedded form
  // everywhere needs 30 loads per 28 FMAs and the loads bound the loop); the last row keeps the
  // embedded form (17 loads per 28 FMAs, under the FMA bound).
  // With a_rs (packs_a) every A element passes through a register on its way to the panel.
  const bool packs_a = d.a_rs > 0;
  // With b_rs (packs_b) B's rows are read in place, kPackedBSourcePrefetchSteps ahead into L1
  // (they come from memory: the first call over a panel), and each stored to the packed panel
  // (at bpack) for the calls after it.
  const bool packs_b = d.b_rs > 0;
  auto embed = [&](int i) { return !packs_a && avx512 && (nv == 1 || (nv == 2 && i == mr - 1)); };
  const ax::Gp apack = cbase;  // free until the epilogue loads the constant base
  const ax::Gp bpack = cbase;  // likewise (never with apack)
  // A tile of fewer than kMinChains accumulators waits on the FMA latency (each k-step's FMA into
  // an accumulator needs the previous one's result): such tiles keep two sets, even k-steps into
  // one and odd into the other, added together after the K loop. kMinChains is the Zen 1's FMA
  // latency. AMD EPYC Zen 1, edge tiles alone (kc 256, one call at a time over 22 A micro-panels
  // and one B panel), ns a call, one set -> two: 1x16 441-512 -> 287-337, 2x16 469-553 ->
  // 422-503, 1x8 456-502 -> 242-269, 2x8 482-509 -> 264-303, 3x8 445-447 -> 365-369; 4x8 within
  // the noise (460-542 -> 464-551). Two sets cost more past it: 5x8 551-556 -> 580, 3x16 (6
  // accumulators) 541-547 -> 553-560. (Intel's 4 x 2 FMAs a cycle would want 8; not measured.)
  constexpr int kMinChains = 5;
  const int sets = nacc < kMinChains && 2 * nacc + nv + 2 <= v.num_regs() ? 2 : 1;
  const int nbc = sets * nacc + nv + 2 <= v.num_regs() ? 2 : 1;
  auto acc_in = [&](int set, int i, int j) { return v.vec(set * nacc + i * nv + j); };
  auto acc = [&](int i, int j) { return acc_in(0, i, j); };
  auto breg = [&](int j) { return v.vec(sets * nacc + j); };
  auto bc = [&](int i) { return v.vec(sets * nacc + nv + i % nbc); };

  // panel_loop: the kernel runs KernelArgs::panels panels of B, each over the same A micro-panel
  // into the next C tile to the right; B's panels follow one another, so each starts where the
  // K loop left rb. What the loop keeps across panels lives in the red zone below rsp (the kernel
  // calls nothing): A's micro-panel, the C tile, the tile's column offset in bytes (for bias,
  // column scale and residual), the panels left, and B's next panel.
  const bool loop_panels = d.panel_loop != 0;
  KILN_CHECK(!loop_panels || (d.cols == d.NR && !d.a_rs && !d.b_rs)) << d.name();
  const ax::Mem saved_a = ax::qword_ptr(ax::rsp, -8), saved_c = ax::qword_ptr(ax::rsp, -16),
                col_offset = ax::qword_ptr(ax::rsp, -24), panels_left = ax::qword_ptr(ax::rsp, -32),
                saved_b = ax::qword_ptr(ax::rsp, -40);
  asmjit::Label panel_top = a.newLabel();
  // narrow: an AVX2 edge tile of fewer columns than rows runs its K loop the other way round, on
  // A's micro-panel (the MR rows of a k-step, one vector) times a broadcast of each B element, into
  // a vector per column: cols FMAs a k-step instead of rows. The columns are transposed into the
  // row registers after the loop, and the epilogue is the same. A vector of A reads 8 floats, two
  // of the next k-step's (lanes never stored), but the last k-step's reads exactly MR. Sets of
  // accumulators over alternate k-steps keep at least 4 FMA chains.
  const bool narrow = !avx512 && !packs_a && !packs_b && !loop_panels && d.cols < mr &&
                      d.cols <= kNarrowMaxCols && d.MR <= vl;
  const int ncols = int(d.cols);
  const int nsets = ncols == 1 ? 4 : 2;
  auto col_acc = [&](int j, int set) { return v.vec(set * ncols + j); };
  const ax::Vec avec = v.vec(nsets * ncols);
  auto bcn = [&](int j) { return v.vec(nsets * ncols + 1 + j % 2); };
  const int ksets = narrow ? nsets : sets;
  if (loop_panels) {
    a.mov(saved_a, ra);
    a.mov(saved_c, rc);
    a.mov(col_offset, 0);
    a.mov(cnt, ax::ptr(args, arg(offsetof(KernelArgs, panels))));
    a.mov(panels_left, cnt);
    a.bind(panel_top);
  }
  // ra, rb and rc arrive holding the call's a, b and c (see KernelFn).
  a.mov(cnt, ax::ptr(args, arg(offsetof(KernelArgs, kc))));
  // One row of a C tile into L1 from `row` (C's rows are ldc apart, which the hardware
  // prefetchers do not follow; a row need not start on a line).
  auto prefetch_c_row = [&](const ax::Gp& row) {
    const int32_t row_bytes = int32_t(d.cols * 4);
    for (int32_t off = 0; off < row_bytes; off += 64) a.prefetcht0(ax::ptr(row, off));
    a.prefetcht0(ax::ptr(row, row_bytes - 1));
  };
  // Prefetch this C tile; the K loop hides the latency. Where the previous call's K loop
  // prefetched it (KernelArgs::c_next, below) these hit L1.
  a.mov(rem, ax::ptr(args, arg(offsetof(KernelArgs, ldc_bytes))));
  a.mov(bias, rc);
  for (int i = 0; i < mr; ++i) {
    prefetch_c_row(bias);
    if (i + 1 < mr) a.add(bias, rem);
  }
  for (int i = 0; i < (narrow ? nsets * ncols : sets * nacc); ++i) v.zero(v.vec(i));

  // B's panel is the streamed operand (too big for L1 at the usual KC, and on a panel's first use
  // it comes from L3): prefetched kBPrefetchSteps k-steps ahead, line by line. Measured on a
  // Xeon (Emerald Rapids): 128x4096x1024 with a prepacked B went from 0.93x to 1.02-1.12x of
  // oneDNN; A's micro-panel (a line every four k-steps) gained nothing from the same.
  // B's k-step u: its row in place (packs_b), else in the panel.
  const int64_t b_step = packs_b ? d.b_rs : d.NR;
  const int prefetch_steps = packs_b ? kPackedBSourcePrefetchSteps : kBPrefetchSteps;
  // B's row of k-step u prefetch_steps ahead, line by line (AVX2's 16-float row is one); in place
  // (packs_b) a row need not start on a line: its last float's line too.
  auto prefetch_b_row = [&](int u) {
    const int32_t ahead = int32_t((prefetch_steps + u) * b_step * 4);
    for (int32_t line = 0; line < int32_t(d.NR * 4); line += 64)
      a.prefetcht0(ax::ptr(rb, ahead + line));
    if (packs_b) a.prefetcht0(ax::ptr(rb, ahead + int32_t(d.NR * 4 - 4)));
  };
  // The narrow K loop's k-step u (safe: A's vector loads exactly MR floats).
  auto narrow_body = [&](int u, int set, bool safe) {
    prefetch_b_row(u);
    const ax::Mem am = ax::ptr(ra, int32_t(u * d.MR * 4));
    if (safe)
      v.load_masked(avec, am, int(d.MR));
    else
      a.vmovups(avec, am);
    for (int j = 0; j < ncols; ++j) {
      a.vbroadcastss(bcn(j), ax::dword_ptr(rb, int32_t((u * d.NR + j) * 4)));
      a.vfmadd231ps(col_acc(j, set), avec, bcn(j));
    }
  };
  auto body = [&](int u, int set) {
    if (narrow) return narrow_body(u, set, false);
    prefetch_b_row(u);
    for (int j = 0; j < nv; ++j)
      a.vmovups(breg(j), ax::ptr(rb, int32_t((u * b_step + j * vl) * 4)));
    if (packs_b)
      for (int j = 0; j < nv; ++j)
        a.vmovups(ax::ptr(bpack, int32_t((u * d.NR + j * vl) * 4)), breg(j));
    for (int i = 0; i < mr; ++i) {
      ax::Mem ai = ax::dword_ptr(ra, int32_t((packs_a ? u + i * d.a_rs : u * d.MR + i) * 4));
      if (embed(i)) {
        for (int j = 0; j < nv; ++j) a.vfmadd231ps(acc_in(set, i, j), breg(j), ai._1to16());
      } else {
        a.vbroadcastss(bc(i), ai);
        if (packs_a) a.vmovss(ax::dword_ptr(apack, int32_t((u * d.MR + i) * 4)), bc(i).xmm());
        for (int j = 0; j < nv; ++j) a.vfmadd231ps(acc_in(set, i, j), breg(j), bc(i));
      }
    }
  };
  // A's step per k: along its rows in place, else the packed panel's MR.
  const int32_t a_step = int32_t((packs_a ? 1 : d.MR) * 4);
  if (packs_a) a.mov(apack, ax::ptr(args, arg(offsetof(KernelArgs, a_pack))));
  if (packs_b) a.mov(bpack, ax::ptr(args, arg(offsetof(KernelArgs, b_pack))));
  asmjit::Label main_loop = a.newLabel(), rem_start = a.newLabel(), rem_loop = a.newLabel(),
                done = a.newLabel();
  // The next B panel into L2, a line per unrolled iteration from KernelArgs::b_next (the driver
  // gives each micro-panel over a B panel its own stretch of the next one), so that a panel's
  // first use does not wait on L3 (a prepacked 128x4096x1024: ~+4%, paired). res is free until
  // the epilogue.
  a.mov(res, ax::ptr(args, arg(offsetof(KernelArgs, b_next))));
  a.mov(bias, ax::ptr(args, arg(offsetof(KernelArgs, c_next))));
  if (loop_panels) {  // before the last panel: the next panel of B and the next C tile
    asmjit::Label last_panel = a.newLabel();
    a.cmp(panels_left, 1);
    a.jbe(last_panel);
    a.mov(res, cnt);
    a.imul(res, res, int32_t(d.NR * 4));
    a.add(res, rb);
    a.lea(bias, ax::ptr(rc, int32_t(d.NR * 4)));
    a.bind(last_panel);
  }
  // The next call's C tile (KernelArgs::c_next) into L1, a row per unrolled iteration over the
  // last mr iterations (all of them where the K block is shorter), so that its epilogue finds C
  // in L1 where C comes from L3: a tile's own prefetch above, one K block earlier, is too late
  // where K is short. Intel Xeon, paired plans, 2 threads: 2000x2000x128 1.13x, 1000x1000x64
  // 1.08-1.11x, 4000x4000x32 1.12x (1 thread 2000x2000x128 1.11x); 512^3 1.01-1.02x, 2048^3 1.01x,
  // 256^3 1.03x, 128x4096x1024 1.02x, 1000x100x1000 0.98-1.02x, 300^3 0.98x, 700^3 1.00x;
  // KILN_ISA=avx2 1.00-1.02x. Each row over the whole K loop instead (wrapping every mr
  // iterations) was 0.94x at 256^3 and 0.98x at 2048^3; two rows per iteration over the last mr / 2
  // 1.05-1.10x on the short-K shapes.
  // narrow: the loops run kc - 1 k-steps, the last one after them.
  asmjit::Label narrow_end = a.newLabel();
  if (narrow) {
    a.test(cnt, cnt);
    a.jz(narrow_end);
    a.dec(cnt);
  }
  a.shr(cnt, 2);
  a.jz(rem_start);
  a.align(asmjit::AlignMode::kCode, 16);
  a.bind(main_loop);
  for (int u = 0; u < kUnroll; ++u) body(u, u % ksets);
  a.prefetcht1(ax::ptr(res));
  a.add(res, 64);
  {
    asmjit::Label not_yet = a.newLabel();
    a.cmp(cnt, mr);
    a.ja(not_yet);
    prefetch_c_row(bias);
    a.add(bias, ax::ptr(args, arg(offsetof(KernelArgs, ldc_bytes))));
    a.bind(not_yet);
  }
  a.add(ra, kUnroll * a_step);
  if (packs_a) a.add(apack, int32_t(kUnroll * d.MR * 4));
  if (packs_b) a.add(bpack, int32_t(kUnroll * d.NR * 4));
  a.add(rb, int32_t(kUnroll * b_step * 4));
  a.dec(cnt);
  a.jnz(main_loop);
  a.bind(rem_start);
  a.mov(rem, ax::ptr(args, arg(offsetof(KernelArgs, kc))));
  if (narrow) a.dec(rem);
  a.and_(rem, kUnroll - 1);
  a.jz(done);
  a.bind(rem_loop);
  body(0, 0);
  a.add(ra, a_step);
  if (packs_a) a.add(apack, int32_t(d.MR * 4));
  if (packs_b) a.add(bpack, int32_t(d.NR * 4));
  a.add(rb, int32_t(b_step * 4));
  a.dec(rem);
  a.jnz(rem_loop);
  a.bind(done);
  if (narrow) {
    narrow_body(0, 0, true);
    a.bind(narrow_end);
    // The sets summed; each column's vector to the red zone, and each row's elements back.
    for (int set = 1; set < nsets; ++set)
      for (int j = 0; j < ncols; ++j) a.vaddps(col_acc(j, 0), col_acc(j, 0), col_acc(j, set));
    for (int j = 0; j < ncols; ++j) a.vmovups(ax::ptr(ax::rsp, -128 + 32 * j), col_acc(j, 0));
    for (int i = 0; i < mr; ++i) {
      const ax::Xmm row = acc(i, 0).xmm();
      a.vmovss(row, ax::dword_ptr(ax::rsp, -128 + 4 * i));
      for (int j = 1; j < ncols; ++j)
        a.vinsertps(row, row, ax::dword_ptr(ax::rsp, -128 + 32 * j + 4 * i), uint8_t(j << 4));
    }
  }
  if (sets == 2 && !narrow)
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nv; ++j) a.vaddps(acc(i, j), acc(i, j), acc_in(1, i, j));
  if (loop_panels) a.mov(saved_b, rb);

  // Epilogue, row by row: (+ C's partial sum), then on the last K block scale, bias, act, residual.
  // An activation worth a second pass (needs_pass: all but relu) is left to it, with the residual:
  // the tile is stored without them, then reloaded three rows at a time ([rc + ldc * {0, 1, 2}])
  // and activated in groups of independent lanes (VecEmitter::activation_pass).
  const bool last = d.last != 0;
  const Activation act = last ? Activation(d.act) : Activation::none;
  const bool second_pass = VecEmitter::needs_pass(act);
  if (second_pass) a.mov(rb, rc);  // the tile's first C row, for the second pass (rb is free now)
  a.mov(rem, ax::ptr(args, arg(offsetof(KernelArgs, ldc_bytes))));
  // An epilogue vector's pointer from `args`, at this tile's first column.
  auto load_column_ptr = [&](const ax::Gp& r, size_t field) {
    a.mov(r, ax::ptr(args, arg(field)));
    if (loop_panels) a.add(r, col_offset);
  };
  if (last && d.has_bias) load_column_ptr(bias, offsetof(KernelArgs, bias));
  if (last && d.has_residual) load_column_ptr(res, offsetof(KernelArgs, residual));
  // The column scale in ra (A's pointer, free after the K loop; the second pass reuses it).
  const ax::Gp cs = ra;
  if (last && d.has_col_scale) load_column_ptr(cs, offsetof(KernelArgs, col_scale));
  v.load_const_base();
  v.set_mask(last_n, cnt);
  const ax::Vec t[4] = {v.vec(nacc), v.vec(nacc + 1), v.vec(nacc + 2), v.vec(nacc + 3)};
  VecEmitter::Epilogue e;
  e.scale = last && d.has_scale;
  e.scale_mem = ax::dword_ptr(args, arg(offsetof(KernelArgs, scale)));
  e.bias = last && d.has_bias;
  e.col_scale = last && d.has_col_scale;
  e.act = second_pass ? Activation::none : act;
  e.residual = last && !second_pass ? d.has_residual : kResidualNone;
  for (int i = 0; i < mr; ++i) {
    for (int j = 0; j < nv; ++j) {
      const int n = j == nv - 1 ? last_n : vl;
      ax::Mem cm = ax::ptr(rc, int32_t(j * vl * 4));
      if (d.accumulate) v.add_mem(acc(i, j), cm, n, t[0]);
      e.bias_mem = ax::ptr(bias, int32_t(j * vl * 4));
      e.col_scale_mem = ax::ptr(cs, int32_t(j * vl * 4));
      e.residual_mem = ax::ptr(res, int32_t(j * vl * 4));
      v.epilogue(acc(i, j), e, n, t);
      v.store_masked(cm, acc(i, j), n, t[0]);
    }
    if (i + 1 < mr) {
      a.add(rc, rem);
      if (e.residual) a.add(res, ax::ptr(args, arg(offsetof(KernelArgs, ldr_bytes))));
    }
  }
  if (second_pass) {
    const bool residual = d.has_residual != kResidualNone;
    const ax::Gp ldr = ra;  // free after the K loop
    a.mov(rc, rb);
    if (residual) {
      load_column_ptr(res, offsetof(KernelArgs, residual));
      a.mov(ldr, ax::ptr(args, arg(offsetof(KernelArgs, ldr_bytes))));
    }
    auto row_mem = [&](const ax::Gp& base, const ax::Gp& ld, int k, int32_t disp) {
      return k == 0 ? ax::ptr(base, disp) : ax::ptr(base, ld, uint32_t(k - 1), disp);
    };
    std::vector<VecEmitter::TileItem> items;
    for (int r0 = 0; r0 < mr; r0 += 3) {
      const int rows = std::min(3, mr - r0);
      items.clear();
      for (int k = 0; k < rows; ++k)
        for (int j = 0; j < nv; ++j)
          items.push_back({row_mem(rc, rem, k, int32_t(j * vl * 4)),
                           row_mem(res, ldr, k, int32_t(j * vl * 4)), j == nv - 1 ? last_n : vl});
      v.activation_pass(items, act, d.has_residual, 0);
      if (r0 + 3 < mr) {
        a.lea(rc, ax::ptr(rc, rem, 1));
        a.add(rc, rem);
        if (residual) {
          a.lea(res, ax::ptr(res, ldr, 1));
          a.add(res, ldr);
        }
      }
    }
  }
  if (loop_panels) {  // the next panel: same A, B where this one's K loop ended, C to the right
    asmjit::Label all_done = a.newLabel();
    a.dec(panels_left);
    a.jz(all_done);
    a.mov(ra, saved_a);
    a.mov(rb, saved_b);
    a.mov(rc, saved_c);
    a.add(rc, int32_t(d.NR * 4));
    a.mov(saved_c, rc);
    a.add(col_offset, int32_t(d.NR * 4));
    a.jmp(panel_top);
    a.bind(all_done);
  }
  a.vzeroupper();
  a.ret();
}

}  // namespace kiln::x86
