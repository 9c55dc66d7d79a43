// The dot-product GEMV generator, for GEMV-like problems whose reduction runs along the rows of the
// large operand: x @ W.T with W [N, K] row-major (M = 1, B's rows unit-stride along K), or A @ b
// with b one column (N = 1, A's rows unit-stride along K). out[j] = epilogue(sum_k v[k] X[j, k])
// for the `cols` rows X[j] of the chunk, X[j] at b + j * b_rs, v at a (unit stride), out[j] at
// c + j * ldc, the residual's j-th element ld_res apart.
// Eight rows at a time, each row read front to back with its own accumulator (eight streams the
// hardware prefetchers follow, eight independent FMA chains); the eight sums are reduced across
// lanes into one ymm vector, which gets the epilogue (bias per output or, for N = 1, one bias value
// for all) and is stored. The K loop's bound and tail are specialized (K is an immediate).
// AVX-512 kernels with two vectors (rows = 2, the second a_rs elements after the first) take both
// dot products with each row of X as it is loaded (sixteen accumulators), so X is read once for
// two rows of A (or columns of B); the second vector's outputs and residual are
// KernelArgs::ldc_bytes and ldr_bytes past the first's, and with one bias value per vector
// (bias_bcast) its value is the next one. With three or four vectors (AVX-512, rows = 3 or 4,
// each a_rs elements after the one before) a group is four rows of X, again sixteen
// accumulators: each element of X is loaded once for all four vectors, half the loads of X
// that two passes with two vectors take (those are split across lines wherever X's rows are
// not 64-byte aligned). AVX2 kernels with two vectors take groups of four rows the same way
// (eight accumulators in its sixteen registers).
// Kernels with k_align (X's rows a multiple of a vector's bytes apart) find at run time how many
// elements h lie before X's next vector boundary (AVX-512: 0-15, to its 64-byte line; AVX2:
// 0-7, to 32 bytes), take K's first h elements as a masked head (the top h lanes of the vector
// before) and the rest from that boundary on, so no load of X is split across two lines; the K
// elements past the whole vectors that always fit (0 to 2 vl - 2 of them, as h varies) take two
// masked steps. The masks: AVX-512 k2-k4; AVX2 ymm11, ymm14, ymm15, free in the K loop and
// reloaded from the stack for each group (the epilogue's temporaries take them). A
// weight from malloc or NumPy sits 16 bytes off a line: every 64-byte load of it split in two,
// every other 32-byte one. v must sit as far off a boundary as X (else h = 0; run_dot copies v
// there, dot_path.cpp). AVX2 masked steps load under the masks by vmaskmovps only where a second
// vector sits off a whole vector from the first; elsewhere aligned loads ANDed with the masks, or
// K's last floats by xmm moves where there is no head (DotGen::and_steps_).
#include "codegen/x86/generators.h"
#include "codegen/x86/vec_emit.h"
#include "support/check.h"

#include <algorithm>
#include <cstddef>

namespace kiln::x86 {

namespace {

// k_align's run-time masks (DotGen::kmask, ymask).
enum class Lanes { none, head, rest1, rest2 };

constexpr int kRows = 8;      // rows of X per group (one or two vectors), one accumulator each
constexpr int kQuadRows = 4;  // rows of X per group with three or four vectors
constexpr int kUnroll = 2;    // vectors of K per loop iteration
// k_align, AVX2: the three masks' copies, then whether the masked steps' loads sit on vector
// boundaries (kAlignedFlag: 0 if so; DotGen::masked_step).
constexpr int kAvx2MaskStack = 4 * 32;
constexpr int32_t kAlignedFlag = 3 * 32;

int32_t arg(size_t offset) { return static_cast<int32_t>(offset); }

class DotGen {
 public:
  DotGen(ax::Assembler& a, const KernelDesc& d)
      : a_(a),
        d_(d),
        v_(a, d.isa == int64_t(Isa::avx512), ax::rax),
        y_(a, false, ax::rax),
        vl_(v_.lanes()),
        vecs_(int(d.rows)),
        quad_(vecs_ >= 3 || (vecs_ == 2 && !v_.avx512())),
        group_rows_(quad_ ? kQuadRows : kRows),
        ka_(d.k_align != 0),
        and_steps_(ka_ && !v_.avx512() && (vecs_ == 1 || d.a_rs % vl_ == 0)) {
    KILN_CHECK(d.cols >= 1 && d.K >= 1 && d.a_cs == 1 &&
               (d.rows == 1 || d.rows == 2 || (d.rows <= 4 && d.isa == int64_t(Isa::avx512))))
        << d.name();
    KILN_CHECK(!ka_ || (d.K >= 2 * vl_ && (d.cols == 1 || d.b_rs % vl_ == 0)))
        << "k_align needs K of two vectors and X's rows whole vectors apart: " << d.name();
    auto mag = [](int64_t v) { return v < 0 ? -v : v; };
    const int64_t reach =
        (group_rows_ - 1) * std::max({mag(d.b_rs), mag(d.ldc), mag(d.ld_res)}) * 4 + d.K * 4 + 64 +
        (vecs_ - 1) * mag(d.a_rs) * 4;
    KILN_CHECK(reach < (int64_t{1} << 31)) << "strides too large for a dot kernel: " << d.name();
  }
  void emit();

 private:
  // One group of `rows` rows of X: their sums, the epilogue, the store of `rows` outputs.
  void group(int rows);
  // k_step in groups of four rows (quad_): acc_quad(j, r) += v_j[k0, k0 + n) * X[r, k0, k0 + n).
  void k_step_quad(int rows, int32_t off, int n, bool idx, Lanes lanes);
  // acc(r) += v[k0 .. k0 + n) * X[r, k0 .. k0 + n) over `rows` rows; `idx` adds the loop's offset.
  // `lanes` (k_align): a mask set at run time, which takes the place of n.
  void k_step(int rows, int u, int32_t off, int n, bool idx, Lanes lanes = Lanes::none);
  // dst = [m] over n lanes (masked-off lanes zero), or over the lanes of `lanes` where given.
  void load(const ax::Vec& dst, const ax::Mem& m, int n, Lanes lanes);
  // k_align: h (the head's elements) and the masks of the head and of the two steps after the
  // whole vectors, from X's address.
  void align_setup();
  // k_align: a masked step (the head, or the second after the whole vectors; with and_steps_
  // the first too), skipped where its mask is empty; with and_steps_, ANDed loads or K's last
  // floats by xmm moves, as kAlignedFlag says.
  void masked_step(int rows, int32_t off, bool idx, Lanes lanes);
  // k_align's masks: AVX-512 k2-k4, AVX2 ymm11, ymm14, ymm15.
  ax::KReg kmask(Lanes l) const { return ax::KReg(ax::k2.id() + uint32_t(l) - 1); }
  ax::Ymm ymask(Lanes l) const {
    return ax::ymm(l == Lanes::head ? 11 : l == Lanes::rest1 ? 14 : 15);
  }
  // ymm0 = the eight accumulators' sums (lane r: row r).
  void reduce();
  void epilogue_store(int rows);
  void gather(int dst, const ax::Gp& base, int64_t stride, int rows);

  ax::Vec acc(int r) const { return v_.vec(r); }
  ax::Vec vin(int u) const { return v_.vec(kRows + u); }
  ax::Vec tmp() const { return v_.vec(kRows + kUnroll); }
  // Two vectors (AVX-512): the second's accumulators and inputs, and X's rows as loaded.
  ax::Vec acc2(int r) const { return v_.vec(16 + r); }
  ax::Vec vin2(int u) const { return v_.vec(16 + kRows + u); }
  ax::Vec xrow(int r) const { return v_.vec(16 + kRows + kUnroll + r % 4); }
  // Groups of four rows (quad_): vector j's accumulator for row r of a group, its j-th input
  // and row r's load. Vectors 0 and 1 sit where reduce() takes them (acc(0..7)), 2 and 3 where
  // acc2 does. AVX2 (16 registers, two vectors): rows loaded into ymm8-9, tmp() ymm10 the mask.
  ax::Vec acc_quad(int j, int r) const { return v_.vec((j >= 2 ? 16 : 0) + (j % 2) * 4 + r); }
  ax::Vec vin_quad(int j) const { return v_.vec(12 + j); }
  ax::Vec xrow_quad(int r) const { return v_.avx512() ? xrow(r) : v_.vec(8 + r % 2); }
  // Reduce, epilogue and store of the second vector's sums (moved into acc(0..7) first).
  void second_vector(int rows);
  // Reduce, epilogue and store of three or four vectors' sums (each pair's in acc(0..7) when
  // reduced: ymm0 = [the first's rows | the second's]).
  void quad_vectors(int rows);
  // out_ (and the residual, bias and column scale) to the next vector's outputs (+1) or back.
  void step_vector(int sign);
  ax::Vec ymm(int i) const { return y_.vec(i); }
  ax::Mem xmem(int r, int32_t off, bool idx) const {
    const int32_t disp = int32_t(r * d_.b_rs * 4) + off;
    return idx ? ax::ptr(xe_, idx_, 0, disp) : ax::ptr(xe_, disp);
  }

  ax::Assembler& a_;
  const KernelDesc& d_;
  VecEmitter v_;  // the ISA's vectors: the K loop
  VecEmitter y_;  // ymm: the reduced sums and the epilogue (eight outputs)
  int vl_;
  int vecs_;        // vectors per pass (d.rows)
  bool quad_;       // groups of four rows of X, each row's vector of K loaded once for all vectors
  int group_rows_;  // rows of X per group
  bool ka_;         // k_align: X's loads on its lines (a head of h elements, found at run time)
  // AVX2 k_align: the masked steps also come as whole aligned loads ANDed with their masks, taken
  // at run time where X and every vector sit the same distance off a 32-byte boundary (on whole
  // floats): each such load is one aligned vector that holds at least one of the step's floats,
  // so it never leaves that float's page, and the AND zeroes the lanes past the step. On an AMD
  // Zen 1 a vmaskmovps load cost ~4x a plain one: one thread, KILN_CACHE=off, masked against
  // ANDed in alternate processes: 1x256x256 x @ W.T 6.8 -> 4.8 us, 1x1000x1000 94-107 -> 84-87
  // us, 1x1024x1024 116-124 -> 103-108 us; 1x4096x1024 (from memory) within the noise. Vectors
  // other than the first sit a_rs floats further: only where that keeps them on boundaries.
  // Where the flag says X and v sit at different distances there is no head, and the steps
  // after the whole vectors load K's last floats by xmm moves: such a kernel has no vmaskmovps.
  bool and_steps_;
  bool and_masks_ = false;  // the loads being emitted are and_steps_'s ANDed ones
  // args, v, X, out arrive as the call's arguments (KernelFn); xe_/ve_: X's group and v past the
  // looped part of K; idx_: the loop's (negative) byte offset; the group counter; bias, residual;
  // the column scale (r12, saved only by kernels that have one).
  const ax::Gp args_ = ax::rdi, v_base_ = ax::rsi, x_ = ax::rdx, out_ = ax::rcx, xe_ = ax::r8,
               ve_ = ax::r9, idx_ = ax::r10, gcnt_ = ax::r11, bias_ = ax::rbx, res_ = ax::rbp,
               cs_ = ax::r12;
  // k_align: h * 4 (bytes before X's next vector boundary), saved and restored.
  const ax::Gp hbytes_ = ax::r13;
  int64_t kloop_ = 0;  // elements of K covered by the loop (a multiple of kUnroll vectors)
  int64_t kvec_ = 0;   // whole vectors of K (k_align: those that fit past any head)
};

void DotGen::load(const ax::Vec& dst, const ax::Mem& m, int n, Lanes lanes) {
  if (lanes != Lanes::none && v_.avx512())
    a_.k(kmask(lanes)).z().vmovups(dst, m);
  else if (lanes != Lanes::none && and_masks_)
    a_.vandps(dst, ymask(lanes), m);
  else if (lanes != Lanes::none)
    a_.vmaskmovps(dst, ymask(lanes), m);
  else if (n == vl_)
    a_.vmovups(dst, m);
  else  // masked lanes zero (AVX-512: the mask is k1; AVX2: xmm moves of n floats)
    v_.load_masked(dst, m, n);
}

void DotGen::k_step(int rows, int u, int32_t off, int n, bool idx, Lanes lanes) {
  if (quad_) return k_step_quad(rows, off, n, idx, lanes);
  const ax::Vec v = vin(u);
  const ax::Mem vm = idx ? ax::ptr(ve_, idx_, 0, off) : ax::ptr(ve_, off);
  if (d_.rows == 2) {
    const int32_t off2 = off + int32_t(d_.a_rs * 4);
    const ax::Mem vm2 = idx ? ax::ptr(ve_, idx_, 0, off2) : ax::ptr(ve_, off2);
    const ax::Vec v2 = vin2(u);
    load(v, vm, n, lanes);
    load(v2, vm2, n, lanes);
    for (int r = 0; r < rows; ++r) {
      load(xrow(r), xmem(r, off, idx), n, lanes);
      a_.vfmadd231ps(acc(r), v, xrow(r));
      a_.vfmadd231ps(acc2(r), v2, xrow(r));
    }
    return;
  }
  if (lanes != Lanes::none) {
    load(v, vm, n, lanes);
    for (int r = 0; r < rows; ++r) {
      load(tmp(), xmem(r, off, idx), n, lanes);
      a_.vfmadd231ps(acc(r), v, tmp());
    }
    return;
  }
  if (n == vl_) {
    a_.vmovups(v, vm);
    for (int r = 0; r < rows; ++r) a_.vfmadd231ps(acc(r), v, xmem(r, off, idx));
    return;
  }
  // K's tail: masked loads (masked-off lanes are zero in both, so they add nothing).
  const ax::Vec t = tmp();
  v_.load_masked(v, vm, n);
  for (int r = 0; r < rows; ++r) {
    v_.load_masked(t, xmem(r, off, idx), n);
    a_.vfmadd231ps(acc(r), v, t);
  }
}

void DotGen::k_step_quad(int rows, int32_t off, int n, bool idx, Lanes lanes) {
  for (int j = 0; j < vecs_; ++j) {
    const int32_t o = off + int32_t(j * d_.a_rs * 4);
    load(vin_quad(j), idx ? ax::ptr(ve_, idx_, 0, o) : ax::ptr(ve_, o), n, lanes);
  }
  for (int r = 0; r < rows; ++r) {
    const ax::Vec x = xrow_quad(r);
    load(x, xmem(r, off, idx), n, lanes);
    for (int j = 0; j < vecs_; ++j) a_.vfmadd231ps(acc_quad(j, r), vin_quad(j), x);
  }
}

void DotGen::align_setup() {
  // Scratch: idx_, gcnt_ and xe_, ve_ (set after this). hbytes = (-X) mod the vector's bytes,
  // rounded down to whole floats; h = hbytes / 4. Where v sits a different distance off a
  // boundary than X, no head (h = 0): aligning X's loads would split v's.
  const int32_t vbytes = vl_ * 4;
  asmjit::Label same = a_.newLabel();
  a_.mov(hbytes_, x_);
  a_.neg(hbytes_);
  a_.and_(hbytes_, vbytes - 4);
  a_.mov(idx_, x_);
  a_.sub(idx_, v_base_);
  if (and_steps_) {
    // kAlignedFlag = ((X - v) | (X & 3)) & 31: 0 where X and v sit the same distance off a
    // boundary, on whole floats (X + hbytes is then a boundary, as every masked step's load);
    // elsewhere no head, so the steps' lanes are known (masked_step).
    a_.mov(gcnt_, x_);
    a_.and_(gcnt_, 3);
    a_.or_(idx_, gcnt_);
    a_.and_(idx_.r32(), vbytes - 1);
    a_.mov(ax::dword_ptr(ax::rsp, kAlignedFlag), idx_.r32());
  }
  a_.test(idx_.r32(), vbytes - 1);
  a_.jz(same);
  a_.xor_(hbytes_.r32(), hbytes_.r32());
  a_.bind(same);
  // r = K - h - kvec_ * vl elements after the whole vectors, in [0, 2 vl - 1): min(r, vl) lanes
  // in the first step (rest1), the rest (r - vl where positive) in the second (rest2).
  const int32_t r0 = int32_t(d_.K - kvec_ * vl_);  // r for h = 0
  if (v_.avx512()) {
    // The head: lanes [vl - h, vl) of the vector before (X + hbytes - 64), K's elements [0, h).
    const ax::Gp ones = gcnt_.r32(), m = xe_.r32();
    a_.mov(ones, (1 << vl_) - 1);
    a_.mov(idx_, hbytes_);
    a_.shr(idx_, 2);
    a_.neg(idx_);
    a_.add(idx_, vl_);
    a_.bzhi(m, ones, idx_.r32());  // lanes [0, vl - h)
    a_.xor_(m, ones);              // lanes [vl - h, vl)
    a_.kmovw(kmask(Lanes::head), m);
    a_.add(idx_, r0 - vl_);  // r
    a_.bzhi(m, ones, idx_.r32());
    a_.kmovw(kmask(Lanes::rest1), m);
    a_.xor_(m, m);  // (before the sub: it sets the flags cmovs reads)
    a_.sub(idx_, vl_);
    a_.cmovs(idx_.r32(), m);
    a_.bzhi(m, ones, idx_.r32());
    a_.kmovw(kmask(Lanes::rest2), m);
    return;
  }
  // AVX2: the mask table's lanes [0, n) start (8 - n) floats in (VecEmitter::mask_table). The
  // head's: lanes [0, 8 - h) at hbytes in, inverted.
  a_.vmovdqu(ymask(Lanes::head), v_.mask_table(hbytes_, 0));
  a_.vpcmpeqd(ymask(Lanes::rest2), ymask(Lanes::rest2), ymask(Lanes::rest2));
  a_.vpxor(ymask(Lanes::head), ymask(Lanes::head), ymask(Lanes::rest2));
  // rest1: n = min(r, 8), at (8 - n) * 4 = 32 - 4 n; rest2: n = max(r - 8, 0).
  const ax::Gp r = idx_, n = gcnt_, off = xe_;
  a_.mov(r, hbytes_);
  a_.shr(r, 2);
  a_.neg(r);
  a_.add(r, r0);
  a_.mov(n, vl_);
  a_.cmp(r, vl_);
  a_.cmovb(n, r);
  a_.mov(off, n);
  a_.shl(off, 2);
  a_.neg(off);
  a_.vmovdqu(ymask(Lanes::rest1), v_.mask_table(off, vbytes));
  a_.xor_(n.r32(), n.r32());
  a_.sub(r, vl_);
  a_.cmovs(r, n);
  a_.shl(r, 2);
  a_.neg(r);
  a_.vmovdqu(ymask(Lanes::rest2), v_.mask_table(r, vbytes));
  // Kept on the stack: the epilogue's temporaries take these registers.
  for (Lanes l : {Lanes::head, Lanes::rest1, Lanes::rest2})
    a_.vmovdqu(ax::ptr(ax::rsp, int32_t(uint32_t(l) - 1) * vbytes), ymask(l));
}

void DotGen::masked_step(int rows, int32_t off, bool idx, Lanes lanes) {
  asmjit::Label skip = a_.newLabel();
  if (v_.avx512())
    a_.kortestw(kmask(lanes), kmask(lanes));
  else
    a_.vtestps(ymask(lanes), ymask(lanes));  // ZF: no lane's sign bit set
  a_.jz(skip);
  if (!and_steps_) {
    k_step(rows, 0, off, vl_, idx, lanes);
    a_.bind(skip);
    return;
  }
  asmjit::Label unaligned = a_.newLabel();
  a_.cmp(ax::dword_ptr(ax::rsp, kAlignedFlag), 0);
  a_.jne(unaligned);
  and_masks_ = true;
  k_step(rows, 0, off, vl_, idx, lanes);
  and_masks_ = false;
  a_.jmp(skip);
  // Off the boundaries there is no head (align_setup): the steps after the whole vectors take
  // min(r0, vl) and r0 - vl of K's last r0 elements, by xmm moves. Against vmaskmovps under the
  // masks, AMD Zen 1, one thread, v 1-5 floats further off a boundary than X, alternate
  // processes: 1x200x512 x @ W.T 8.0-8.9 -> 7.1-7.3 us, 1x128x1000 9.5-9.6 -> 9.1 us, 2x200x512
  // 12.4-12.8 -> 11.8-12.7 us.
  a_.bind(unaligned);
  const int r0 = int(d_.K - kvec_ * vl_);
  const int n = lanes == Lanes::rest1 ? std::min(r0, vl_) : lanes == Lanes::rest2 ? r0 - vl_ : 0;
  if (n > 0) k_step(rows, 0, off, n, idx);
  a_.bind(skip);
}

void DotGen::reduce() {
  if (v_.avx512()) {
    const ax::Ymm hi = ax::ymm(kRows);
    for (int r = 0; r < kRows; ++r) {
      a_.vextractf64x4(hi, ax::zmm(r), 1);
      a_.vaddps(ax::ymm(r), ax::ymm(r), hi);
    }
  }
  // hadd(a, b) = [a01 a23 b01 b23 | a45 a67 b45 b67] (pairs summed within each 128-bit half).
  for (int r = 0; r < kRows; r += 2) a_.vhaddps(ymm(r), ymm(r), ymm(r + 1));
  a_.vhaddps(ymm(0), ymm(0), ymm(2));  // [row 0..3 low-half sums | row 0..3 high-half sums]
  a_.vhaddps(ymm(4), ymm(4), ymm(6));  // the same for rows 4..7
  a_.vperm2f128(ymm(1), ymm(0), ymm(4), 0x20);
  a_.vperm2f128(ymm(2), ymm(0), ymm(4), 0x31);
  a_.vaddps(ymm(0), ymm(1), ymm(2));
}

// Lanes [0, rows) of ymm(dst) from `rows` floats `stride` elements apart at base (ymm(dst +
// 1) is clobbered).
void DotGen::gather(int dst, const ax::Gp& base, int64_t stride, int rows) {
  const ax::Xmm lo = ax::xmm(dst), hi = ax::xmm(dst + 1);
  auto elem = [&](int r) { return ax::dword_ptr(base, int32_t(r * stride * 4)); };
  for (int h = 0; h < 2 && h * 4 < rows; ++h) {
    const ax::Xmm x = h ? hi : lo;
    a_.vmovss(x, elem(h * 4));
    for (int r = h * 4 + 1; r < std::min(rows, h * 4 + 4); ++r)
      a_.vinsertps(x, x, elem(r), uint8_t((r % 4) << 4));
  }
  if (rows > 4) a_.vinsertf128(ax::ymm(dst), ax::ymm(dst), hi, 1);
}

void DotGen::epilogue_store(int rows) {
  const ax::Vec x = ymm(0);
  const ax::Vec t[4] = {ymm(12), ymm(13), ymm(14), ymm(15)};
  // Outputs (and residual elements) a row apart, or one residual row for all (ld_res 0): the
  // residual gathered into ymm(10) and applied after the rest of the epilogue (it comes last), the
  // outputs stored one lane at a time.
  const bool res_strided = d_.has_residual && d_.ld_res != 1;
  if (d_.has_epilogue()) {
    VecEmitter::Epilogue e;
    e.scale = d_.has_scale;
    e.scale_mem = ax::dword_ptr(args_, arg(offsetof(KernelArgs, scale)));
    e.bias = d_.has_bias;
    e.bias_broadcast = d_.bias_bcast != 0;
    e.bias_mem = d_.bias_bcast ? ax::dword_ptr(bias_) : ax::ptr(bias_);
    e.col_scale = d_.has_col_scale;
    e.col_scale_mem = d_.bias_bcast ? ax::dword_ptr(cs_) : ax::ptr(cs_);
    e.act = Activation(d_.act);
    e.residual = res_strided ? kResidualNone : d_.has_residual;
    e.residual_mem = ax::ptr(res_);
    y_.epilogue(x, e, rows, t);
  }
  if (res_strided) {
    gather(10, res_, d_.ld_res, rows);
    if (d_.has_residual == kResidualMul)
      a_.vmulps(x, x, ymm(10));
    else
      a_.vaddps(x, x, ymm(10));
  }
  if (d_.ldc == 1) {
    y_.store_masked(ax::ptr(out_), x, rows, t[0]);
    return;
  }
  if (rows > 4) a_.vextractf128(ax::xmm(1), ax::ymm(0), 1);
  for (int r = 0; r < rows; ++r)
    a_.vextractps(ax::dword_ptr(out_, int32_t(r * d_.ldc * 4)), ax::xmm(r < 4 ? 0 : 1),
                  uint8_t(r % 4));
}

void DotGen::step_vector(int sign) {
  // a_rows: the next column's bias and column scale values
  const bool bias_step = d_.has_bias && d_.bias_bcast;
  const bool cs_step = d_.has_col_scale && d_.bias_bcast;
  const ax::Mem ldc = ax::ptr(args_, arg(offsetof(KernelArgs, ldc_bytes)));
  const ax::Mem ldr = ax::ptr(args_, arg(offsetof(KernelArgs, ldr_bytes)));
  if (sign > 0) {
    a_.add(out_, ldc);
    if (d_.has_residual) a_.add(res_, ldr);
    if (bias_step) a_.add(bias_, 4);
    if (cs_step) a_.add(cs_, 4);
  } else {
    a_.sub(out_, ldc);
    if (d_.has_residual) a_.sub(res_, ldr);
    if (bias_step) a_.sub(bias_, 4);
    if (cs_step) a_.sub(cs_, 4);
  }
}

void DotGen::second_vector(int rows) {
  for (int r = 0; r < kRows; ++r) a_.vmovaps(acc(r), acc2(r));
  reduce();
  step_vector(+1);
  epilogue_store(rows);
  step_vector(-1);
}

void DotGen::quad_vectors(int rows) {
  const ax::Ymm held = ax::ymm(9);  // the second vector's sums while the first's are stored
  for (int pair = 0; pair * 2 < vecs_; ++pair) {
    if (pair)
      for (int r = 0; r < kRows; ++r) a_.vmovaps(acc(r), acc2(r));
    reduce();
    a_.vextractf128(ax::xmm(9), ax::ymm(0), 1);
    if (pair) step_vector(+1);
    epilogue_store(rows);
    if (pair * 2 + 1 < vecs_) {
      a_.vmovaps(ax::ymm(0), held);
      step_vector(+1);
      epilogue_store(rows);
    }
  }
  for (int j = 1; j < vecs_; ++j) step_vector(-1);
}

void DotGen::group(int rows) {
  for (int r = 0; r < kRows; ++r) v_.zero(acc(r));
  if (v_.avx512() && d_.rows >= 2)
    for (int r = 0; r < kRows; ++r) v_.zero(acc2(r));
  const int32_t vbytes = int32_t(vl_ * 4);
  if (ka_ && !v_.avx512())
    for (Lanes l : {Lanes::head, Lanes::rest1, Lanes::rest2})
      a_.vmovdqu(ymask(l), ax::ptr(ax::rsp, int32_t(uint32_t(l) - 1) * vbytes));
  if (ka_) {
    // X (and v) from the head's end: xe_ = X + hbytes + the loop's bytes. The head's line
    // starts 64 bytes before X + hbytes: at offset -(the loop's bytes) - 64 from xe_.
    a_.lea(xe_, ax::ptr(x_, hbytes_, 0, int32_t(kloop_ * 4)));
    masked_step(rows, int32_t(-kloop_ * 4 - vl_ * 4), false, Lanes::head);
  } else {
    a_.lea(xe_, ax::ptr(x_, int32_t(kloop_ * 4)));
  }
  if (kloop_ > 0) {
    asmjit::Label loop = a_.newLabel();
    a_.mov(idx_, -kloop_ * 4);
    a_.align(asmjit::AlignMode::kCode, 16);
    a_.bind(loop);
    for (int u = 0; u < kUnroll; ++u) k_step(rows, u, u * vbytes, vl_, true);
    a_.add(idx_, kUnroll * vbytes);
    a_.jnz(loop);
  }
  // Whole vectors past the loop, then the masked tail.
  const int64_t rest = kvec_ - kloop_ / vl_;
  for (int64_t i = 0; i < rest; ++i)
    k_step(rows, int(i % kUnroll), int32_t(i * vbytes), vl_, false);
  if (ka_) {
    // (An ANDed load must hold one of the step's floats: rest1 is skipped where empty too.)
    if (and_steps_)
      masked_step(rows, int32_t(rest * vbytes), false, Lanes::rest1);
    else
      k_step(rows, 0, int32_t(rest * vbytes), vl_, false, Lanes::rest1);
    masked_step(rows, int32_t((rest + 1) * vbytes), false, Lanes::rest2);
  } else if (const int tail = int(d_.K % vl_)) {
    k_step(rows, int(rest % kUnroll), int32_t(rest * vbytes), tail, false);
  }
  if (quad_) return quad_vectors(rows);
  reduce();
  epilogue_store(rows);
  if (d_.rows == 2) second_vector(rows);
}

void DotGen::emit() {
  // rbx and rbp are callee-saved.
  a_.push(ax::rbx);
  a_.push(ax::rbp);
  if (d_.has_col_scale) {
    a_.push(cs_);
    a_.mov(cs_, ax::ptr(args_, arg(offsetof(KernelArgs, col_scale))));
  }
  // k_align: the whole vectors that fit past any head of 0 to vl - 1 elements.
  kvec_ = ka_ ? (d_.K - vl_ + 1) / vl_ : d_.K / vl_;
  kloop_ = kvec_ / kUnroll * kUnroll * vl_;
  v_.load_const_base();
  if (ka_) {
    a_.push(hbytes_);
    if (!v_.avx512()) a_.sub(ax::rsp, kAvx2MaskStack);
    align_setup();
    a_.lea(ve_, ax::ptr(v_base_, hbytes_, 0, int32_t(kloop_ * 4)));
  } else {
    a_.lea(ve_, ax::ptr(v_base_, int32_t(kloop_ * 4)));
  }
  const int tail = int(d_.K % vl_);
  if (tail && !ka_) v_.set_mask(tail, idx_);
  if (d_.has_bias) a_.mov(bias_, ax::ptr(args_, arg(offsetof(KernelArgs, bias))));
  if (d_.has_residual) a_.mov(res_, ax::ptr(args_, arg(offsetof(KernelArgs, residual))));
  const int64_t groups = d_.cols / group_rows_;
  const int rest = int(d_.cols % group_rows_);
  auto step = [&](const ax::Gp& reg, int64_t stride) {
    const int64_t bytes = group_rows_ * stride * 4;
    if (bytes == int64_t(int32_t(bytes))) {
      a_.add(reg, int32_t(bytes));
    } else {
      a_.mov(idx_, bytes);
      a_.add(reg, idx_);
    }
  };
  auto advance = [&] {
    step(x_, d_.b_rs);
    step(out_, d_.ldc);
    if (d_.has_bias && !d_.bias_bcast) a_.add(bias_, group_rows_ * 4);
    if (d_.has_col_scale && !d_.bias_bcast) a_.add(cs_, group_rows_ * 4);
    if (d_.has_residual) step(res_, d_.ld_res);
  };
  if (groups > 0) {
    asmjit::Label loop = a_.newLabel();
    a_.mov(gcnt_, groups);
    a_.bind(loop);
    group(group_rows_);
    advance();
    a_.dec(gcnt_);
    a_.jnz(loop);
  }
  if (rest) group(rest);
  a_.vzeroupper();
  if (ka_ && !v_.avx512()) a_.add(ax::rsp, kAvx2MaskStack);
  if (ka_) a_.pop(hbytes_);
  if (d_.has_col_scale) a_.pop(cs_);
  a_.pop(ax::rbp);
  a_.pop(ax::rbx);
  a_.ret();
}

}  // namespace

void emit_dot_kernel(ax::Assembler& a, const KernelDesc& d) {
  DotGen g(a, d);
  g.emit();
}

}  // namespace kiln::x86
