// The direct (unpacked) kernel generator, LIBXSMM style: M, N, K and every stride are immediates,
// A elements are broadcast straight from the caller's matrix, B rows (unit column stride) are
// loaded straight from memory, and the epilogue is applied before the only store of C.
// Loops: row blocks (at most two heights, balanced), column tiles (full tiles in a loop, one masked
// edge tile), K (fully unrolled up to 16, else 4x unrolled with an unrolled remainder); with
// KernelDesc::cols_outer (the skinny path's kernels of several row blocks) column tiles outer.
#include "codegen/x86/generators.h"
#include "codegen/x86/vec_emit.h"
#include "support/check.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kiln::x86 {

namespace {

constexpr int kUnroll = kDirectUnrollK;
constexpr int64_t kFullUnrollK = 16;

int32_t arg(size_t offset) { return static_cast<int32_t>(offset); }

class DirectGen {
 public:
  DirectGen(ax::Assembler& a, const KernelDesc& d)
      : a_(a), d_(d), v_(a, d.isa == int64_t(Isa::avx512), ax::r13), vl_(v_.lanes()) {}

  void emit();

 private:
  void row_block(int mr, int nv_full);
  // The C tile this row block stores next, prefetched by the tile before it (pf_c_): `width`
  // floats of each row from W floats past the current tile's first column (W: the full tiles'
  // width), or from column `clamp` where that comes first (the loop's tiles: the loop's last has
  // no full tile after it, only the rest tile's columns or none).
  struct CNext {
    int64_t W = 0, width = 0, clamp = -1;
  };
  // prefetch_a: the tile also prefetches the next row block's rows of A (pf_rows_, emit());
  // c_next (width > 0): and the C tile this row block stores next.
  void tile(int mr, int nv, int last_n, bool prefetch_a, CNext c_next);
  void prefetch_c_next(int mr, const CNext& c);
  // looped: A and B from the K loop's running pointers; prefetch: B's rows b_prefetch ahead;
  // prefetch_a: a share of the next row block's rows of A at this k-step's column.
  void k_step(int mr, int nv, int last_n, int64_t k, bool looped, bool prefetch, bool prefetch_a);
  // pf_off_ = the first row (from the current block's) of the pf_rows_ rows to prefetch
  // (direct_prefetch_row): the blocks of this height left are icnt_ where they loop, else 1;
  // after: rows in later blocks of another height.
  void set_prefetch_rows(int64_t rows, bool looped, int64_t after);
  // Registers after the accumulators: mr == 1: broadcast, temp; else B vectors, broadcast. The
  // epilogue's four temporaries start at the first of them.
  int regs_used(int mr, int nv) const { return nacc_ + std::max(4, mr == 1 ? 2 : nv + 1); }

  ax::Assembler& a_;
  const KernelDesc& d_;
  VecEmitter v_;
  int vl_;
  // Registers: args, A row block, B, C row block (the first four arrive as the call's arguments,
  // see KernelFn), residual row block, bias, column offset (bytes), running A and B pointers, K
  // loop and row-block loop counters (the constant base is r13), the column scale (r14, saved
  // only by kernels that have one).
  const ax::Gp args_ = ax::rdi, ai_ = ax::rsi, b_ = ax::rdx, ci_ = ax::rcx, ri_ = ax::r8,
               bias_ = ax::r9, col_ = ax::r10, ak_ = ax::r11, bk_ = ax::rax, kcnt_ = ax::rbx,
               icnt_ = ax::r12, cs_ = ax::r14;
  // Prefetching A's rows ahead (a row block's first tile, in its K loop) and C's next tile: the
  // row offset pf_off_ (A) and pf_tmp_ (A's byte offset, C's column), saved by the kernels that
  // use them.
  const ax::Gp pf_off_ = ax::rbp, pf_tmp_ = ax::r15;
  int nacc_ = 0;
  int64_t pf_rows_ = 0;  // rows of A prefetched ahead; 0: none
  bool pf_c_ = false;    // each full tile prefetches the next tile of C
};

// A's rows are prefetched a row block ahead where that block's rows take at most this many bytes
// (a quarter of the smallest L1 data cache): further ahead the lines fell out of L1 before their
// use, and 4096x16x4096 (A's rows 16 KiB long) ran 0.69x.
constexpr int64_t kDirectPrefetchRowBytes = 8 << 10;

ax::Vec acc_reg(const VecEmitter& v, int nv, int i, int j) { return v.vec(i * nv + j); }

void DirectGen::k_step(int mr, int nv, int last_n, int64_t k, bool looped, bool prefetch,
                       bool prefetch_a) {
  const ax::Gp abase = looped ? ak_ : ai_;
  const int32_t adisp = int32_t(k * d_.a_cs * 4);
  const int32_t bdisp = int32_t(k * d_.b_rs * 4);
  auto bmem = [&](int j) {
    return looped ? ax::ptr(bk_, bdisp + j * vl_ * 4) : ax::ptr(b_, col_, 0, bdisp + j * vl_ * 4);
  };
  if (mr == 1) {
    // GEMV-like: one broadcast of A, B straight from memory into the FMAs.
    const ax::Vec bc = v_.vec(nacc_), tmp = v_.vec(nacc_ + 1);
    a_.vbroadcastss(bc, ax::dword_ptr(abase, adisp));
    for (int j = 0; j < nv; ++j) {
      const bool edge = j == nv - 1 && last_n < vl_;
      if (!edge) {
        a_.vfmadd231ps(acc_reg(v_, nv, 0, j), bc, bmem(j));
      } else if (v_.avx512()) {
        a_.k(ax::k1).vfmadd231ps(acc_reg(v_, nv, 0, j), bc, bmem(j));
      } else {
        v_.load_masked(tmp, bmem(j), last_n);
        a_.vfmadd231ps(acc_reg(v_, nv, 0, j), bc, tmp);
      }
    }
    return;
  }
  // The rows ahead (pf_tmp_ holds their offset in bytes) at this k-step's column: the K loop's
  // k-step u of each iteration takes the rows i with i % kUnroll == u, so that every line of
  // those rows is prefetched as the running pointer passes it (each kUnroll times: a line holds
  // 16 k-steps' floats).
  if (prefetch_a && looped)
    for (int64_t i = k % kUnroll; i < pf_rows_; i += kUnroll)
      a_.prefetcht0(ax::ptr(ak_, pf_tmp_, 0, adisp + int32_t(i * d_.a_rs * 4)));
  // B's lines d_.b_prefetch rows ahead (rows far apart, from L3 or memory: see the skinny path).
  if (looped && prefetch && d_.b_prefetch > 0)
    for (int j = 0; j < nv; ++j)
      a_.prefetcht0(ax::ptr(bk_, bdisp + int32_t(d_.b_prefetch * d_.b_rs * 4) + j * vl_ * 4));
  for (int j = 0; j < nv; ++j) {
    const ax::Vec bj = v_.vec(nacc_ + j);
    const bool edge = j == nv - 1 && last_n < vl_;
    if (!edge)
      a_.vmovups(bj, bmem(j));
    else
      v_.load_masked(bj, bmem(j), last_n);
  }
  // AVX-512: with one column vector the A element is a {1to16} operand of the FMA itself; with
  // more, a register broadcast loads it once (the last row of two vectors keeps the embedded
  // form, as the packed kernel's does). Embedded in both FMAs of a two-vector row, a 14-row tile
  // issued 30 loads per 28 FMAs and the loads bound it: on the AMD EPYC Zen 5, 1 thread,
  // gemm_call_overhead_bench, 32^3 0.78x of LIBXSMM -> 1.00x; gemm_bench against OpenBLAS, two
  // runs each (GFLOP/s, old -> new): 32^3 154-171 -> 204-217, 17^3 75-78 -> 102-106, 24^3 122-123
  // -> 152-159, 64x32x64 172-184 -> 216-223, 10x100x100 158-163 -> 193-201, 128x32x128 284-294
  // -> 348-388, 14x512x512 297-298 -> 397-417.
  const ax::Vec bc = v_.vec(nacc_ + nv);
  for (int i = 0; i < mr; ++i) {
    ax::Mem ai = ax::dword_ptr(abase, adisp + int32_t(i * d_.a_rs * 4));
    if (v_.avx512() && (nv == 1 || (nv == 2 && i == mr - 1))) {
      for (int j = 0; j < nv; ++j)
        a_.vfmadd231ps(acc_reg(v_, nv, i, j), v_.vec(nacc_ + j), ai._1to16());
    } else {
      a_.vbroadcastss(bc, ai);
      for (int j = 0; j < nv; ++j) a_.vfmadd231ps(acc_reg(v_, nv, i, j), v_.vec(nacc_ + j), bc);
    }
  }
}

void DirectGen::set_prefetch_rows(int64_t rows, bool looped, int64_t after) {
  if (!looped) {
    a_.mov(pf_off_, direct_prefetch_row(rows, 1, after, pf_rows_));
    return;
  }
  // direct_prefetch_row(rows, icnt_, after, pf_rows_)
  a_.imul(pf_off_, icnt_, int32_t(rows));
  if (after != pf_rows_) a_.add(pf_off_, int32_t(after - pf_rows_));
  a_.mov(pf_tmp_, rows);
  a_.cmp(pf_off_, pf_tmp_);
  a_.cmovg(pf_off_, pf_tmp_);
}

void DirectGen::prefetch_c_next(int mr, const CNext& c) {
  a_.lea(pf_tmp_, ax::ptr(col_, int32_t(c.W * 4)));
  if (c.clamp >= 0) {
    asmjit::Label within = a_.newLabel();
    a_.cmp(pf_tmp_, int32_t(c.clamp * 4));
    a_.jbe(within);
    a_.mov(pf_tmp_, c.clamp * 4);
    a_.bind(within);
  }
  const int32_t bytes = int32_t(c.width * 4);
  for (int i = 0; i < mr; ++i) {
    const int32_t row = int32_t(i * d_.ldc * 4);
    // Each 64 bytes of the tile's row, and its last float (the row need not start a line).
    for (int32_t off = 0; off < bytes; off += 64)
      a_.prefetcht0(ax::ptr(ci_, pf_tmp_, 0, row + off));
    a_.prefetcht0(ax::ptr(ci_, pf_tmp_, 0, row + bytes - 4));
  }
}

void DirectGen::tile(int mr, int nv, int last_n, bool prefetch_a, CNext c_next) {
  nacc_ = mr * nv;
  KILN_CHECK(regs_used(mr, nv) <= v_.num_regs()) << d_.name();
  v_.set_mask(last_n, ak_);  // AVX-512's k1; AVX2's edges take xmm moves (VecEmitter)
  for (int i = 0; i < nacc_; ++i) v_.zero(v_.vec(i));
  const int64_t K = d_.K;
  if (K <= kFullUnrollK) {
    for (int64_t k = 0; k < K; ++k) k_step(mr, nv, last_n, k, false, false, false);
  } else {
    if (c_next.width > 0) prefetch_c_next(mr, c_next);
    if (prefetch_a) a_.imul(pf_tmp_, pf_off_, int32_t(d_.a_rs * 4));
    a_.mov(ak_, ai_);
    a_.lea(bk_, ax::ptr(b_, col_));
    // The iterations that prefetch, then those that do not (direct_prefetch_steps).
    const DirectPrefetchSteps pf = direct_prefetch_steps(K, d_.b_prefetch, d_.last != 0);
    auto k_loop = [&](int64_t iterations, bool prefetch) {
      if (iterations == 0) return;
      a_.mov(kcnt_, iterations);
      asmjit::Label loop = a_.newLabel();
      a_.align(asmjit::AlignMode::kCode, 16);
      a_.bind(loop);
      for (int u = 0; u < kUnroll; ++u) k_step(mr, nv, last_n, u, true, prefetch, prefetch_a);
      a_.add(ak_, int32_t(kUnroll * d_.a_cs * 4));
      a_.add(bk_, int32_t(kUnroll * d_.b_rs * 4));
      a_.dec(kcnt_);
      a_.jnz(loop);
    };
    k_loop(pf.iterations, true);
    k_loop(K / kUnroll - pf.iterations, false);
    for (int64_t u = 0; u < K % kUnroll; ++u)
      k_step(mr, nv, last_n, u, true, pf.remainder, prefetch_a);
  }
  const ax::Vec t[4] = {v_.vec(nacc_), v_.vec(nacc_ + 1), v_.vec(nacc_ + 2), v_.vec(nacc_ + 3)};
  // With K split into blocks (skinny shapes), C holds the partial sum between blocks. An
  // activation worth a second pass (all but relu) is applied by one, with the residual, over the
  // stored tile in groups of independent lanes (see packed_kernel.cpp).
  const bool last = d_.last != 0;
  const Activation act = last ? Activation(d_.act) : Activation::none;
  const bool second_pass = VecEmitter::needs_pass(act);
  VecEmitter::Epilogue e;
  e.scale = last && d_.has_scale;
  e.scale_mem = ax::dword_ptr(args_, arg(offsetof(KernelArgs, scale)));
  e.bias = last && d_.has_bias;
  e.col_scale = last && d_.has_col_scale;
  e.act = second_pass ? Activation::none : act;
  e.residual = last && !second_pass ? d_.has_residual : kResidualNone;
  auto c_mem = [&](int i, int j) {
    return ax::ptr(ci_, col_, 0, int32_t((i * d_.ldc + j * vl_) * 4));
  };
  auto res_mem = [&](int i, int j) {
    return ax::ptr(ri_, col_, 0, int32_t((i * d_.ld_res + j * vl_) * 4));
  };
  for (int i = 0; i < mr; ++i) {
    for (int j = 0; j < nv; ++j) {
      const int n = j == nv - 1 ? last_n : vl_;
      const ax::Mem cm = c_mem(i, j);
      if (d_.accumulate) v_.add_mem(acc_reg(v_, nv, i, j), cm, n, t[0]);
      e.bias_mem = ax::ptr(bias_, col_, 0, int32_t(j * vl_ * 4));
      e.col_scale_mem = ax::ptr(cs_, col_, 0, int32_t(j * vl_ * 4));
      e.residual_mem = res_mem(i, j);
      v_.epilogue(acc_reg(v_, nv, i, j), e, n, t);
      v_.store_masked(cm, acc_reg(v_, nv, i, j), n, t[0]);
    }
  }
  if (second_pass) {
    std::vector<VecEmitter::TileItem> items;
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nv; ++j)
        items.push_back({c_mem(i, j), res_mem(i, j), j == nv - 1 ? last_n : vl_});
    v_.activation_pass(items, act, last ? d_.has_residual : kResidualNone, 0);
  }
}

void DirectGen::row_block(int mr, int nv_full) {
  const int64_t W = int64_t(nv_full) * vl_;
  const int64_t nfull = d_.cols / W;
  const int64_t rest = d_.cols % W;
  a_.xor_(col_.r32(), col_.r32());
  // The first tile prefetches the next row block's rows of A (the others find them in cache):
  // it runs before the loop that takes the other full tiles.
  const bool prefetch_a = pf_rows_ > 0;
  const int64_t peeled = prefetch_a && nfull > 0 ? 1 : 0;
  if (peeled > 0) {
    CNext c;
    if (pf_c_ && (nfull > 1 || rest > 0)) c = {W, nfull > 1 ? W : rest, -1};
    tile(mr, nv_full, vl_, true, c);
    if (nfull > 1 || rest > 0) a_.add(col_, int32_t(W * 4));
  }
  if (nfull > peeled) {
    CNext c;
    if (pf_c_ && (nfull - peeled > 1 || rest > 0)) c = {W, W, d_.cols - W};
    asmjit::Label loop = a_.newLabel();
    a_.bind(loop);
    tile(mr, nv_full, vl_, false, c);
    if (nfull - peeled > 1 || rest > 0) a_.add(col_, int32_t(W * 4));
    if (nfull - peeled > 1) {
      a_.cmp(col_, int32_t(nfull * W * 4));
      a_.jne(loop);
    }
  }
  if (rest > 0) {
    const int nv = int((rest + vl_ - 1) / vl_);
    tile(mr, nv, int(rest - (nv - 1) * vl_), prefetch_a && nfull == 0, CNext{});
  }
}

void DirectGen::emit() {
  const DirectTiling tiling = direct_tiling(v_.avx512(), d_.rows, d_.cols, d_.rows_cap);
  const int64_t M = d_.rows;
  const int64_t blocks = (M + tiling.rows_max - 1) / tiling.rows_max;
  const int64_t hi = (M + blocks - 1) / blocks;
  const int64_t n_hi = M - blocks * (hi - 1);
  const struct { int64_t rows, count; } groups[2] = {{hi, n_hi}, {hi - 1, blocks - n_hi}};
  const bool residual = d_.has_residual && d_.last;
  // Where A comes from memory (a batch of problems each run once, as attention's q @ k.T and
  // p @ v), a problem's first touch of each line of A waited on it. So a row block's first tile
  // prefetches hi rows of A from the next block's first, never past M (the last blocks take rows
  // before them instead: those hit in cache). Prefetches of the rows past M (another problem's
  // in a contiguous batch, or no one's) ran 5x151x1973 at 0.45x. Not for one block, nor for K
  // up to 16 (a tile's K steps fully unrolled): a problem that small runs mostly from cache,
  // where prefetches only take load slots (16^3 runs 200 ns). Where A's rows run down the
  // columns (a_cs > 1) each k-step's rows share lines, which the hardware's prefetchers follow.
  pf_rows_ = blocks > 1 && d_.K > kFullUnrollK && d_.a_cs == 1 && d_.a_rs > 0 && !d_.cols_outer &&
                     hi * d_.K * 4 <= kDirectPrefetchRowBytes
                 ? hi
                 : 0;
  // And each full tile the next tile of C its row block stores (stores to lines not in cache
  // wait on memory), where the row block has more than one tile and more than one row: 4% on
  // 96x[128x128x64] with B transposed. C's tile below instead gained as much but was held in L1
  // a whole row block ahead: it cost 2.3% where one problem ran again and again (to the right,
  // unclamped: 0.6%).
  // AMD Zen 1, 2 threads, a batch (gemm_batched, each problem once), three alternations of old
  // and new: 96x[128x128x64] with B transposed 61.3 -> 65.0 GFLOP/s, 96x[128x64x128] 63.0 ->
  // 67.2, 48x[384x384x64] with B transposed 68.9 -> 68.9. One problem again and again from cache
  // (one thread): 128x128x64 2.8% slower, 128x64x128 1.8%, 64^3 and 96^3 level.
  pf_c_ =
      d_.K > kFullUnrollK && !d_.cols_outer && hi > 1 && d_.cols > int64_t(tiling.vectors) * vl_;

  a_.push(ax::rbx);
  a_.push(ax::r12);
  a_.push(ax::r13);
  if (pf_rows_ > 0) a_.push(pf_off_);
  if (pf_rows_ > 0 || pf_c_) a_.push(pf_tmp_);
  const bool col_scale = d_.has_col_scale && d_.last;
  if (col_scale) {
    a_.push(cs_);
    a_.mov(cs_, ax::ptr(args_, arg(offsetof(KernelArgs, col_scale))));
  }
  v_.load_const_base();
  if (d_.has_bias && d_.last) a_.mov(bias_, ax::ptr(args_, arg(offsetof(KernelArgs, bias))));
  if (d_.has_residual && d_.last) a_.mov(ri_, ax::ptr(args_, arg(offsetof(KernelArgs, residual))));

  // Every row block over the column tiles [col_, ...) that emit_tiles emits, one block after
  // another (A, C and the residual at the next block's rows after each).
  auto row_blocks = [&](auto&& emit_tiles) {
    for (const auto& g : groups) {
      if (g.count == 0 || g.rows == 0) continue;
      asmjit::Label loop = a_.newLabel();
      if (g.count > 1) {
        a_.mov(icnt_, g.count);
        a_.bind(loop);
      }
      const int64_t after = &g == &groups[0] ? groups[1].rows * groups[1].count : 0;
      if (pf_rows_ > 0) set_prefetch_rows(g.rows, g.count > 1, after);
      emit_tiles(int(g.rows));
      a_.add(ai_, int32_t(g.rows * d_.a_rs * 4));
      a_.add(ci_, int32_t(g.rows * d_.ldc * 4));
      if (residual) a_.add(ri_, int32_t(g.rows * d_.ld_res * 4));
      if (g.count > 1) {
        a_.dec(icnt_);
        a_.jnz(loop);
      }
    }
  };
  if (!d_.cols_outer || blocks == 1) {
    row_blocks([&](int rows) { row_block(rows, tiling.vectors); });
  } else {
    // Column tiles outer: every row block passes over one column tile of B (K x W) before the
    // next, so the blocks after the first find it in L1 or L2, where row blocks outer pass over
    // all of B's columns each (from L2 or L3; see the skinny path).
    const int64_t W = int64_t(tiling.vectors) * vl_;
    const int64_t nfull = d_.cols / W, rest = d_.cols % W;
    auto back_to_first_row = [&] {
      a_.sub(ai_, int32_t(M * d_.a_rs * 4));
      a_.sub(ci_, int32_t(M * d_.ldc * 4));
      if (residual) a_.sub(ri_, int32_t(M * d_.ld_res * 4));
    };
    a_.xor_(col_.r32(), col_.r32());
    if (nfull > 0) {
      asmjit::Label loop = a_.newLabel();
      a_.bind(loop);
      row_blocks([&](int rows) { tile(rows, tiling.vectors, vl_, false, CNext{}); });
      if (nfull > 1 || rest > 0) {
        back_to_first_row();
        a_.add(col_, int32_t(W * 4));
      }
      if (nfull > 1) {
        a_.cmp(col_, int32_t(nfull * W * 4));
        a_.jne(loop);
      }
    }
    if (rest > 0) {
      const int nv = int((rest + vl_ - 1) / vl_);
      row_blocks([&](int rows) { tile(rows, nv, int(rest - (nv - 1) * vl_), false, CNext{}); });
    }
  }
  if (col_scale) a_.pop(cs_);
  if (pf_rows_ > 0 || pf_c_) a_.pop(pf_tmp_);
  if (pf_rows_ > 0) a_.pop(pf_off_);
  a_.pop(ax::r13);
  a_.pop(ax::r12);
  a_.pop(ax::rbx);
  a_.vzeroupper();
  a_.ret();
}

}  // namespace

DirectTiling direct_tiling(bool avx512, int64_t M, int64_t N, int64_t rows_cap) {
  const int vl = avx512 ? 16 : 8;
  const int64_t nvec = (N + vl - 1) / vl;
  DirectTiling t;
  if (M == 1) {
    t.vectors = int(std::min<int64_t>(nvec, 8));
    t.rows_max = 1;
    return t;
  }
  t.vectors = int(std::min<int64_t>(nvec, avx512 ? 4 : 2));
  // Besides the accumulators: nv B vectors and a broadcast register (AVX-512 with nv == 1
  // broadcasts inside the FMA instead); and at least 4 epilogue temporaries. (AVX2 kept a register
  // for an edge mask until its edges took xmm moves; the 4 temporaries bound the same tilings.)
  const int regs = avx512 ? 32 : 16;
  // rows_cap: where A's rows crowd into few L1 sets (gemm_driver.cpp's direct_rows_cap).
  auto rows_for = [&](int nv) {
    const int others = avx512 ? nv + (nv == 1 ? 0 : 1) : nv + 1;
    const int rows = std::min((regs - others) / nv, (regs - 4) / nv);
    return rows_cap > 0 ? int(std::min<int64_t>(rows, rows_cap)) : rows;
  };
  t.rows_max = rows_for(t.vectors);
  // AVX-512 with 7-14 rows: the widest tile of at least two vectors whose rows take all of M in
  // one block (9 x 3, 14 x 2), so each column tile reads its B columns once, not once per row
  // block (4 x 4 twice for 8 rows). Intel Xeon, paired plans: 8x512x512 1.22x, 8x256x1024 1.26x,
  // 8x1000x1000 1.14x, 9x200x100 1.15x, 14x128x128 1.18x, 10x100x100 1.06x, 12x128x128 0.99x,
  // 8x64x64 1.00x. One vector of 28 rows for 15-28 rows ran 0.90-1.10x (24x64x64, 28x64x128,
  // 23x57x91, 20x100x100), and on AVX2 one vector of 12 rows 0.80-0.99x (8-12 rows): not taken.
  if (avx512 && M > t.rows_max) {
    for (int nv = t.vectors - 1; nv >= 2; --nv) {
      if (rows_for(nv) >= M) {
        t.vectors = nv;
        t.rows_max = rows_for(nv);
        break;
      }
    }
  }
  return t;
}

void emit_direct_kernel(ax::Assembler& a, const KernelDesc& d) { DirectGen(a, d).emit(); }

}  // namespace kiln::x86
