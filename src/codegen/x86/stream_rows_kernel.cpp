// The streaming generator for a few rows of C (KernelKind::stream with rows >= 2, B with unit
// column stride): C[0:rows, 0:cols) = epilogue(A[0:rows, :] @ B[:, 0:cols)). As the GEMV's
// (stream_kernel.cpp), C's chunk stays in L1 while B is read row by row, each row's chunk front
// to back. The chunk accumulates in a block of its own (KernelArgs::c_block, its rows a line
// apart in the L1 sets), stored to C after K through the epilogue: C's rows and B's, often a
// multiple of 4 KiB apart, fall into the same few sets, and in place the chunk and B's rows
// overflowed them (8x4096x1024 ran 2.6 ms a call on the Zen 3, 1.25 ms with the block). Four rows
// of B a pass; each pass runs over C's rows in pairs with the pair's 4 x 2 elements of A
// broadcast in registers: per column vector four loads of B (from L1 after the first pair), two
// loads and stores of C and eight FMAs. The first pair's pass prefetches the next four rows of B
// into L2 a line at a time (each row's chunk is a short run a row stride from the next, which the
// hardware prefetchers reach late; into L1 they would take four more ways of the sets B's rows
// share). AVX2 only: the only ISA the planner takes it for (stream_rows_for, stream_path.cpp).
// (The direct kernels' register tiles walk B down its columns, a row stride between loads: on an
// AMD Zen 3 with rows a page apart that ran at a fifth of the GEMV's bandwidth.)
#include "codegen/x86/generators.h"
#include "codegen/x86/stream_loop.h"
#include "codegen/x86/vec_emit.h"
#include "support/check.h"

#include <algorithm>
#include <cstddef>

namespace kiln::x86 {

namespace {

constexpr int kRowsPerPass = kStreamRowsPerPass;

int32_t arg(size_t offset) { return static_cast<int32_t>(offset); }

class StreamRowsGen {
 public:
  StreamRowsGen(ax::Assembler& a, const KernelDesc& d)
      : a_(a), d_(d), v_(a, false, ax::rax), vl_(v_.lanes()) {
    nvec_ = int((d.cols + vl_ - 1) / vl_);
    last_n_ = int(d.cols - int64_t(nvec_ - 1) * vl_);
    full_ = last_n_ == vl_ ? nvec_ : nvec_ - 1;
    KILN_CHECK(d.isa == int64_t(Isa::avx2) && d.bias_bcast == 0 && d.cols >= 1 && d.rows >= 2 &&
               d.rows <= kStreamMaxRows && d.a_rs > 0 && d.a_cs > 0 && d.b_rs > 0 &&
               d.ldc >= d.cols)
        << d.name();
    KILN_CHECK(stream_rows_reach_fits(d.rows, d.cols, d.a_rs, d.a_cs, d.b_rs, d.ldc, d.ld_res))
        << "strides too large for a stream kernel: " << d.name();
  }
  void emit();

 private:
  // One pass of `nb` rows of B over C's rows [r0, r0 + g): C[r, j] += sum_q bc(r, q) * B[q, j].
  void pass(int nb, int r0, int g, bool prefetch);
  // Column vector at byte offset `off` from bj_ / yj_ in a pass (edge: masked).
  void update(int nb, int g, int32_t off, bool edge, bool prefetch);
  void zero_rows();
  // C's rows from the block, through the epilogue.
  void store_rows();

  ax::Vec bc(int r, int q) const { return v_.vec(r * kRowsPerPass + q); }
  ax::Vec bv(int q) const { return v_.vec(group_ * kRowsPerPass + q); }
  ax::Vec y(int r) const { return v_.vec(group_ * kRowsPerPass + kRowsPerPass + r); }
  ax::Vec spare() const { return v_.vec(group_ * kRowsPerPass + kRowsPerPass + group_); }
  int32_t row_bytes(int64_t r) const { return int32_t(r * stream_rows_block_ld(d_.cols) * 4); }

  ax::Assembler& a_;
  const KernelDesc& d_;
  VecEmitter v_;
  int vl_;
  static constexpr int group_ = 2;     // C's rows a pass runs over at once
  static constexpr int per_line_ = 2;  // AVX2 vectors in a 64-byte line
  int nvec_ = 0, last_n_ = 0, full_ = 0;
  // yb_: the block of C (C itself, the call's c, waits in the red zone at c_saved_). pf_: the
  // byte distance from this pass's rows of B to the next pass's (0 in the last pass, whose
  // prefetches then reread its own rows instead of reaching past B). rax: the constant base,
  // loaded only for the epilogue.
  const ax::Gp args_ = ax::rdi, x_ = ax::rsi, bb_ = ax::rdx, yb_ = ax::rcx, qcnt_ = ax::r8,
               jcnt_ = ax::r9, bj_ = ax::r10, yj_ = ax::r11, pf_ = ax::rax;
  const ax::Mem c_saved_ = ax::qword_ptr(ax::rsp, -8);
};

void StreamRowsGen::update(int nb, int g, int32_t off, bool edge, bool prefetch) {
  const int32_t brs = int32_t(d_.b_rs * 4);
  for (int q = 0; q < nb; ++q)
    v_.load_masked(bv(q), ax::ptr(bj_, off + q * brs), edge ? last_n_ : vl_);
  if (prefetch)
    for (int q = 0; q < nb; ++q) a_.prefetcht1(ax::ptr(bj_, pf_, 0, off + q * brs));
  // All of the group's loads of C before its stores.
  const int n = edge ? last_n_ : vl_;
  for (int r = 0; r < g; ++r) v_.load_masked(y(r), ax::ptr(yj_, off + row_bytes(r)), n);
  for (int q = 0; q < nb; ++q)
    for (int r = 0; r < g; ++r) a_.vfmadd231ps(y(r), bc(r, q), bv(q));
  for (int r = 0; r < g; ++r) v_.store_masked(ax::ptr(yj_, off + row_bytes(r)), y(r), n, spare());
}

void StreamRowsGen::pass(int nb, int r0, int g, bool prefetch) {
  a_.mov(bj_, bb_);
  a_.lea(yj_, ax::ptr(yb_, row_bytes(r0)));
  // Whole lines a loop iteration (AVX2: two vectors), one prefetch per row of B for each.
  const int iters = full_ / per_line_;
  const int32_t step = int32_t(per_line_ * vl_ * 4);
  if (iters > 0) {
    asmjit::Label loop = a_.newLabel();
    a_.mov(jcnt_, iters);
    a_.align(asmjit::AlignMode::kCode, 16);
    a_.bind(loop);
    for (int u = 0; u < per_line_; ++u)
      update(nb, g, int32_t(u * vl_ * 4), false, prefetch && u == 0);
    a_.add(bj_, step);
    a_.add(yj_, step);
    a_.dec(jcnt_);
    a_.jnz(loop);
  }
  const int rest = full_ - iters * per_line_;
  for (int u = 0; u < rest; ++u) update(nb, g, int32_t(u * vl_ * 4), false, prefetch && u == 0);
  if (full_ < nvec_) update(nb, g, int32_t(rest * vl_ * 4), true, prefetch && rest == 0);
}

void StreamRowsGen::zero_rows() {
  const ax::Vec z = y(0);
  v_.zero(z);
  for (int64_t r = 0; r < d_.rows; ++r) {
    a_.lea(yj_, ax::ptr(yb_, row_bytes(r)));
    if (full_ > 0) {
      asmjit::Label loop = a_.newLabel();
      a_.mov(jcnt_, full_);
      a_.bind(loop);
      a_.vmovups(ax::ptr(yj_), z);
      a_.add(yj_, int32_t(vl_ * 4));
      a_.dec(jcnt_);
      a_.jnz(loop);
    }
    if (full_ < nvec_) v_.store_masked(ax::ptr(yj_), z, last_n_, spare());
  }
}

void StreamRowsGen::store_rows() {
  v_.load_const_base();
  // x_ and bb_ (A's and B's pointers) are free after the passes; bj_ walks C's row.
  const ax::Gp bias = jcnt_, res = bb_, cs = x_, cj = bj_;
  const ax::Vec t[4] = {v_.vec(1), v_.vec(2), v_.vec(3), v_.vec(4)};
  const VecEmitter::Epilogue e = stream_epilogue(d_, args_, bias, cs, res);
  auto one = [&](int n) {
    const ax::Vec c = v_.vec(0);
    v_.load_masked(c, ax::ptr(yj_), n);
    v_.epilogue(c, e, n, t);
    v_.store_masked(ax::ptr(cj), c, n, t[0]);
  };
  const int32_t step = int32_t(vl_ * 4);
  for (int64_t r = 0; r < d_.rows; ++r) {
    if (d_.has_bias) a_.mov(bias, ax::ptr(args_, arg(offsetof(KernelArgs, bias))));
    if (d_.has_col_scale) a_.mov(cs, ax::ptr(args_, arg(offsetof(KernelArgs, col_scale))));
    if (d_.has_residual) {
      a_.mov(res, ax::ptr(args_, arg(offsetof(KernelArgs, residual))));
      if (r > 0) a_.add(res, int32_t(r * d_.ld_res * 4));
    }
    a_.mov(cj, c_saved_);
    if (r > 0) a_.add(cj, int32_t(r * d_.ldc * 4));
    a_.lea(yj_, ax::ptr(yb_, row_bytes(r)));
    if (full_ > 0) {
      asmjit::Label loop = a_.newLabel();
      a_.mov(qcnt_, full_);
      a_.bind(loop);
      one(vl_);
      a_.add(yj_, step);
      a_.add(cj, step);
      if (d_.has_bias) a_.add(bias, step);
      if (d_.has_col_scale) a_.add(cs, step);
      if (d_.has_residual) a_.add(res, step);
      a_.dec(qcnt_);
      a_.jnz(loop);
    }
    if (full_ < nvec_) one(last_n_);
  }
}

void StreamRowsGen::emit() {
  // x_, bb_ and yb_ arrive holding the call's a, b and c (see KernelFn).
  v_.set_mask(last_n_, qcnt_);
  a_.mov(c_saved_, yb_);
  a_.mov(yb_, ax::ptr(args_, arg(offsetof(KernelArgs, c_block))));
  zero_rows();
  const int rows = int(d_.rows);
  const int32_t xs = int32_t(d_.a_cs * 4), brs = int32_t(d_.b_rs * 4);
  auto broadcasts = [&](int r0, int g, int nb) {
    for (int r = 0; r < g; ++r)
      for (int q = 0; q < nb; ++q)
        a_.vbroadcastss(bc(r, q), ax::dword_ptr(x_, int32_t((r0 + r) * d_.a_rs * 4) + q * xs));
  };
  emit_stream_k_loop(a_, args_, qcnt_, [&](int nb) {
    if (nb == kRowsPerPass) {
      asmjit::Label not_last = a_.newLabel();
      a_.mov(pf_, kRowsPerPass * brs);
      a_.cmp(qcnt_, 1);
      a_.jne(not_last);
      a_.xor_(pf_.r32(), pf_.r32());
      a_.bind(not_last);
    }
    for (int r0 = 0; r0 < rows; r0 += group_) {
      const int g = std::min(group_, rows - r0);
      broadcasts(r0, g, nb);
      pass(nb, r0, g, nb == kRowsPerPass && r0 == 0);
    }
    a_.add(bb_, nb * brs);
    a_.add(x_, nb * xs);
  });
  store_rows();
  a_.vzeroupper();
  a_.ret();
}

}  // namespace

void emit_stream_rows_kernel(ax::Assembler& a, const KernelDesc& d) {
  StreamRowsGen g(a, d);
  g.emit();
}

}  // namespace kiln::x86
