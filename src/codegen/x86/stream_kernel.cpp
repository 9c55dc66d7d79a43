// The streaming GEMV generator (M = 1, B with unit column stride): y[0, cols) = epilogue(sum_k
// x[k] * B[k, 0:cols)). y (a chunk of C's one row, a few KiB) stays in L1 while B is read row by
// row, each row's chunk front to back: long sequential runs that the hardware prefetchers follow,
// so the kernel runs at memory bandwidth. bias_bcast: one bias value for all of y (the driver's
// A.T @ x, a one-column C run as its transpose). (The direct kernel's register tiles walk B column
// tile by column tile, jumping a whole row between loads.) Four rows of B per pass over y: one load
// and one store of y per four FMAs.
#include "codegen/x86/generators.h"
#include "codegen/x86/stream_loop.h"
#include "codegen/x86/vec_emit.h"
#include "support/check.h"

#include <cstddef>

namespace kiln::x86 {

namespace {

constexpr int kRowsPerPass = kStreamRowsPerPass;
constexpr int kGroup = 4;  // vectors per column-loop iteration

int32_t arg(size_t offset) { return static_cast<int32_t>(offset); }

class StreamGen {
 public:
  StreamGen(ax::Assembler& a, const KernelDesc& d)
      : a_(a), d_(d), v_(a, d.isa == int64_t(Isa::avx512), ax::rax), vl_(v_.lanes()) {
    nvec_ = int((d.cols + vl_ - 1) / vl_);
    last_n_ = int(d.cols - int64_t(nvec_ - 1) * vl_);
    full_ = last_n_ == vl_ ? nvec_ : nvec_ - 1;
    KILN_CHECK(d.cols >= 1 && d.rows == 1) << d.name();
    const int64_t reach = (kRowsPerPass - 1) * d.b_rs * 4 + d.cols * 4 + 64;
    KILN_CHECK(reach < (int64_t{1} << 31) && kRowsPerPass * d.a_cs * 4 < (int64_t{1} << 31))
        << "strides too large for a stream kernel: " << d.name();
  }
  void emit();

 private:
  // One pass of `rows` rows of B over y: y[j] += sum_r bc_r * B[r, j].
  void pass(int rows);
  // Vector `j`'s update in a pass, at byte offset `off` from yj_ / bj_ (edge: masked).
  void update(int rows, int slot, int32_t off, bool edge);
  void epilogue_pass();

  ax::Vec bc(int r) const { return v_.vec(r); }
  ax::Vec acc(int u) const { return v_.vec(kRowsPerPass + u); }
  ax::Vec tmp(int i) const { return v_.vec(kRowsPerPass + kGroup + i); }

  ax::Assembler& a_;
  const KernelDesc& d_;
  VecEmitter v_;
  int vl_;
  int nvec_ = 0, last_n_ = 0, full_ = 0;
  const ax::Gp args_ = ax::rdi, x_ = ax::rsi, bb_ = ax::rdx, yb_ = ax::rcx, qcnt_ = ax::r8,
               jcnt_ = ax::r9, bj_ = ax::r10, yj_ = ax::r11;
};

void StreamGen::update(int rows, int slot, int32_t off, bool edge) {
  const ax::Vec y = acc(slot);
  const int32_t brs = int32_t(d_.b_rs * 4);
  if (!edge) {
    a_.vmovups(y, ax::ptr(yj_, off));
    for (int r = 0; r < rows; ++r) a_.vfmadd231ps(y, bc(r), ax::ptr(bj_, off + r * brs));
    a_.vmovups(ax::ptr(yj_, off), y);
    return;
  }
  const ax::Vec b = tmp(0), spare = tmp(1);  // spare: store_masked's temporary
  v_.load_masked(y, ax::ptr(yj_, off), last_n_);
  for (int r = 0; r < rows; ++r) {
    v_.load_masked(b, ax::ptr(bj_, off + r * brs), last_n_);
    a_.vfmadd231ps(y, bc(r), b);
  }
  v_.store_masked(ax::ptr(yj_, off), y, last_n_, spare);
}

void StreamGen::pass(int rows) {
  const int32_t step = int32_t(kGroup * vl_ * 4);
  a_.mov(bj_, bb_);
  a_.mov(yj_, yb_);
  const int groups = full_ / kGroup;
  if (groups > 0) {
    asmjit::Label loop = a_.newLabel();
    a_.mov(jcnt_, groups);
    a_.align(asmjit::AlignMode::kCode, 16);
    a_.bind(loop);
    for (int u = 0; u < kGroup; ++u) update(rows, u, int32_t(u * vl_ * 4), false);
    a_.add(yj_, step);
    a_.add(bj_, step);
    a_.dec(jcnt_);
    a_.jnz(loop);
  }
  const int rest = full_ - groups * kGroup;
  for (int u = 0; u < rest; ++u) update(rows, u, int32_t(u * vl_ * 4), false);
  if (full_ < nvec_) update(rows, 0, int32_t(rest * vl_ * 4), true);
}

void StreamGen::epilogue_pass() {
  const bool any = d_.has_epilogue();
  if (!any) return;
  // x_ (A's pointer) is free after the passes: the column scale.
  const ax::Gp bias = bj_, res = bb_, cs = x_;
  if (d_.has_bias) a_.mov(bias, ax::ptr(args_, arg(offsetof(KernelArgs, bias))));
  if (d_.has_col_scale) a_.mov(cs, ax::ptr(args_, arg(offsetof(KernelArgs, col_scale))));
  if (d_.has_residual) a_.mov(res, ax::ptr(args_, arg(offsetof(KernelArgs, residual))));
  a_.mov(yj_, yb_);
  const ax::Vec t[4] = {tmp(0), tmp(1), tmp(2), tmp(3)};
  const VecEmitter::Epilogue e = stream_epilogue(d_, args_, bias, cs, res);
  auto one = [&](int n) {
    const ax::Vec y = acc(0);
    v_.load_masked(y, ax::ptr(yj_), n);
    v_.epilogue(y, e, n, t);
    v_.store_masked(ax::ptr(yj_), y, n, t[0]);
  };
  const int32_t step = int32_t(vl_ * 4);
  if (full_ > 0) {
    asmjit::Label loop = a_.newLabel();
    a_.mov(jcnt_, full_);
    a_.bind(loop);
    one(vl_);
    a_.add(yj_, step);
    if (d_.has_bias && !d_.bias_bcast) a_.add(bias, step);
    if (d_.has_col_scale && !d_.bias_bcast) a_.add(cs, step);
    if (d_.has_residual) a_.add(res, step);
    a_.dec(jcnt_);
    a_.jnz(loop);
  }
  if (full_ < nvec_) one(last_n_);
}

void StreamGen::emit() {
  // x_, bb_ and yb_ arrive holding the call's a, b and c (see KernelFn).
  v_.load_const_base();
  v_.set_mask(last_n_, qcnt_);
  // y = 0.
  {
    const ax::Vec z = acc(0), spare = tmp(1);
    v_.zero(z);
    a_.mov(yj_, yb_);
    for (int j = 0; j < full_; ++j) a_.vmovups(ax::ptr(yj_, int32_t(j * vl_ * 4)), z);
    if (full_ < nvec_) v_.store_masked(ax::ptr(yj_, int32_t(full_ * vl_ * 4)), z, last_n_, spare);
  }
  const int32_t xs = int32_t(d_.a_cs * 4), brs = int32_t(d_.b_rs * 4);
  emit_stream_k_loop(a_, args_, qcnt_, [&](int rows) {
    for (int r = 0; r < rows; ++r) a_.vbroadcastss(bc(r), ax::dword_ptr(x_, r * xs));
    pass(rows);
    a_.add(bb_, rows * brs);
    a_.add(x_, rows * xs);
  });
  epilogue_pass();
  a_.vzeroupper();
  a_.ret();
}

}  // namespace

void emit_stream_kernel(ax::Assembler& a, const KernelDesc& d) {
  StreamGen g(a, d);
  g.emit();
}

}  // namespace kiln::x86
