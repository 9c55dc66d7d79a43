// Shared emission helpers for the GEMM generators: constants, masks and the fused epilogue math.
#include "codegen/x86/vec_emit.h"

#include "codegen/erf_rational.h"
#include "support/check.h"

#include <algorithm>
#include <cstddef>

namespace kiln::x86 {

namespace {

// The constants the generated code reads through one base register, plus the AVX2 lane masks
// (8 x -1 then 8 x 0: the mask for n lanes starts at element 8 - n).
struct alignas(64) ConstTables {
  float consts[kNumConsts][16];
  int32_t masks[16];
};

constexpr ConstTables make_tables() {
  ConstTables t{};
  float v[kNumConsts] = {};
  v[kZero] = 0.0f;
  v[kOne] = 1.0f;
  v[kHalf] = 0.5f;
  v[kNegOne] = -1.0f;
  v[kExpHi] = 88.0f;   // keeps round(x log2 e) <= 127 so the AVX2 exponent trick cannot overflow
  v[kExpLo] = -87.0f;  // e^-87 is a normal float (ln FLT_MIN = -87.34): no denormal results
  v[kLog2e] = 1.44269504088896341f;
  v[kLn2Hi] = 0.693359375f;
  v[kLn2Lo] = -2.12194440e-4f;
  // Cephes expf: e^r = 1 + r + r^2 (0.5 + r/6 + ...), written as one Horner chain.
  const float p[8] = {1.9875691500e-4f,
                      1.3981999507e-3f,
                      8.3334519073e-3f,
                      4.1665795894e-2f,
                      1.6666665459e-1f,
                      5.0000001201e-1f,
                      1.0f,
                      1.0f};
  for (int i = 0; i < 8; ++i) v[kExpP0 + i] = p[i];
  // gelu_tanh(x) = x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) = x / (1 + exp(x (-K - K A x^2))).
  v[kGeluTanhNegK] = -1.5957691216057308f;
  v[kGeluTanhNegKA] = -1.5957691216057308f * 0.044715f;
  // gelu(x) = x (1/2 + erf(y) / 2), y = x / sqrt 2, with erf(y) = y P(y^2) / Q(y^2)
  // (erf_rational.h, as the LLVM backend's erf: no exp, nothing that can underflow). In terms of x:
  // y^2 = x^2 / 2 scales the coefficient of degree d by 2^-d, and the factor 1 / (2 sqrt 2) of x P
  // / 2 goes into P's: gelu(x) = x (1/2 + x P'(x^2) / Q'(x^2)), x clamped to [-5.6, 5.6] inside the
  // ratio. At 5.6 (y = 3.96) erf is 1 to float precision and the ratio evaluates to exactly 1/2, so
  // gelu is exactly x above 5.6 and 0 below -5.6, at any magnitude. (At erf_rational's y = 4, x
  // = 5.657, it evaluates one ulp past 1/2: x = -1e18 then gave 6e10.)
  constexpr double kRsqrt2 = 0.70710678118654752;
  v[kGeluClampLo] = -5.6f;
  v[kGeluClampHi] = 5.6f;
  auto x_coefficient = [](double c, size_t degree, double factor) {
    for (size_t d = 0; d < degree; ++d) c *= 0.5;
    return float(c * factor);
  };
  const size_t np = erf_rational::kP.size(), nq = erf_rational::kQ.size();
  static_assert(kGeluP6 - kGeluP0 + 1 == erf_rational::kP.size() &&
                kGeluQ4 - kGeluQ0 + 1 == erf_rational::kQ.size());
  for (size_t i = 0; i < np; ++i)
    v[kGeluP0 + i] = x_coefficient(erf_rational::kP[i], np - 1 - i, 0.5 * kRsqrt2);
  for (size_t i = 0; i < nq; ++i)
    v[kGeluQ0 + i] = x_coefficient(erf_rational::kQ[i], nq - 1 - i, 1.0);
  for (int c = 0; c < kNumConsts; ++c)
    for (int l = 0; l < 16; ++l) t.consts[c][l] = v[c];
  for (int l = 0; l < 16; ++l) t.masks[l] = l < 8 ? -1 : 0;
  return t;
}

constinit const ConstTables kTables = make_tables();

thread_local std::vector<uint64_t>* t_const_base_sites = nullptr;

}  // namespace

const void* const_table_address() { return &kTables; }

ConstBaseSiteRecorder::ConstBaseSiteRecorder(std::vector<uint64_t>* sites)
    : prev_(t_const_base_sites) {
  t_const_base_sites = sites;
}
ConstBaseSiteRecorder::~ConstBaseSiteRecorder() { t_const_base_sites = prev_; }

void VecEmitter::load_const_base() {
  // movabs: always the 10-byte form with a full 8-byte immediate at the instruction's end, so the
  // disk cache can patch it (kernel_registry.cpp checks the bytes there before storing).
  a_.movabs(const_reg_, asmjit::Imm(reinterpret_cast<intptr_t>(&kTables)));
  if (t_const_base_sites) t_const_base_sites->push_back(uint64_t(a_.offset()) - 8);
}

ax::Mem VecEmitter::mask_table(const ax::Gp& index, int32_t disp) const {
  return ax::ptr(const_reg_, index, 0, int32_t(offsetof(ConstTables, masks)) + disp);
}

void VecEmitter::zero(const ax::Vec& v) {
  if (avx512_)
    a_.vpxord(v, v, v);
  else
    a_.vxorps(v, v, v);
}

void VecEmitter::set_mask(int n, const ax::Gp& scratch) {
  if (!avx512_ || n >= lanes()) return;
  a_.mov(scratch.r32(), (1u << n) - 1);
  a_.kmovw(ax::k1, scratch.r32());
}

namespace {

// m moved on by `bytes`, its access size left to the instruction.
ax::Mem plus(ax::Mem m, int32_t bytes) {
  m.addOffset(bytes);
  m.setSize(0);
  return m;
}

// Lanes [0, n) of x, 1 <= n <= 4, from m; the others zero (a VEX load of an xmm clears the
// ymm's upper half).
void load_xmm_lanes(ax::Assembler& a, const ax::Xmm& x, const ax::Mem& m, int n) {
  if (n == 4) {
    a.vmovups(x, m);
  } else if (n == 1) {
    a.vmovss(x, m);
  } else {
    a.vmovsd(x, m);
    if (n == 3) a.vinsertps(x, x, plus(m, 8), uint8_t(2 << 4));  // lane 2; lane 3 stays zero
  }
}

// Lanes [0, n) of x, 1 <= n <= 4, to m.
void store_xmm_lanes(ax::Assembler& a, const ax::Mem& m, const ax::Xmm& x, int n) {
  if (n == 4) {
    a.vmovups(m, x);
  } else if (n == 1) {
    a.vmovss(m, x);
  } else {
    a.vmovsd(m, x);
    if (n == 3) a.vextractps(plus(m, 8), x, 2);
  }
}

}  // namespace

// AVX2's partial vectors go through xmm moves of exactly their n floats, not vmaskmovps. On an
// AMD Zen 1 a vmaskmovps store, and a masked load of 2 to 5 lanes (not of one), cost far more
// than the moves: one thread, the same kernels but for these moves (KILN_CACHE=off, alternate
// processes): C's stores 1000x2x2 9.7-10.6 -> 1.9-2.4 us, 469x2x7 8.1-8.5 -> 3.4-4.2 us,
// 300x3x5 3.4-3.7 -> 1.4-1.9 us; B's edge loads in the direct kernels' K loop, 300xNx100: N =
// 10 and 12 44.6 -> 26.1 us (N = 16 24.5), N = 9 19.1 either way; both, N = 13 45 -> 33.4-34.1
// us.
void VecEmitter::load_masked(const ax::Vec& dst, const ax::Mem& m, int n) {
  if (n >= lanes()) {
    a_.vmovups(dst, m);
  } else if (avx512_) {
    a_.k(ax::k1).z().vmovups(dst, m);
  } else if (n <= 4) {
    load_xmm_lanes(a_, dst.xmm(), plus(m, 0), n);
  } else {
    // Lanes 4..n-1 into the low half, copied to the high half, then the low half from m.
    load_xmm_lanes(a_, dst.xmm(), plus(m, 16), n - 4);
    a_.vinsertf128(dst.ymm(), dst.ymm(), dst.xmm(), 1);
    a_.vinsertf128(dst.ymm(), dst.ymm(), plus(m, 0), 0);
  }
}

void VecEmitter::store_masked(const ax::Mem& m, const ax::Vec& src, int n, const ax::Vec& tmp) {
  if (n >= lanes()) {
    a_.vmovups(m, src);
  } else if (avx512_) {
    a_.k(ax::k1).vmovups(m, src);
  } else if (n <= 4) {
    store_xmm_lanes(a_, plus(m, 0), src.xmm(), n);
  } else {
    KILN_CHECK(tmp.id() != src.id()) << "store_masked: tmp is the source";
    a_.vmovups(plus(m, 0), src.xmm());
    a_.vextractf128(tmp.xmm(), src.ymm(), 1);
    store_xmm_lanes(a_, plus(m, 16), tmp.xmm(), n - 4);
  }
}

void VecEmitter::add_mem(const ax::Vec& dst, const ax::Mem& m, int n, const ax::Vec& tmp) {
  if (n >= lanes()) {
    a_.vaddps(dst, dst, m);
  } else if (avx512_) {
    a_.k(ax::k1).vaddps(dst, dst, m);  // merge-masked: masked-off lanes neither load nor fault
  } else {
    load_masked(tmp, m, n);
    a_.vaddps(dst, dst, tmp);
  }
}

void VecEmitter::mul_mem(const ax::Vec& dst, const ax::Mem& m, int n, const ax::Vec& tmp) {
  if (n >= lanes()) {
    a_.vmulps(dst, dst, m);
  } else if (avx512_) {
    a_.k(ax::k1).vmulps(dst, dst, m);  // merge-masked, as add_mem
  } else {
    load_masked(tmp, m, n);
    a_.vmulps(dst, dst, tmp);
  }
}

void VecEmitter::residual_mem(int64_t op, const ax::Vec& dst, const ax::Mem& m, int n,
                              const ax::Vec& tmp) {
  if (op == kResidualAdd)
    add_mem(dst, m, n, tmp);
  else if (op == kResidualMul)
    mul_mem(dst, m, n, tmp);
}

// z = exp(z) for every lane's z = l.t[zi] (temporaries l.t[ai], l.t[bi]), about 1 ulp on [-87, 88];
// inputs are clamped to that range.
void VecEmitter::exp_lanes(std::span<const ActLane> lanes, int zi, int ai, int bi) {
  auto each = [&](auto&& emit) {
    for (const ActLane& l : lanes) emit(l.t[zi], l.t[ai], l.t[bi]);
  };
  each([&](auto& z, auto&, auto&) { a_.vminps(z, z, cst(kExpHi)); });
  each([&](auto& z, auto&, auto&) { a_.vmaxps(z, z, cst(kExpLo)); });
  each([&](auto& z, auto& ta, auto&) { a_.vmulps(ta, z, cst(kLog2e)); });
  each([&](auto&, auto& ta, auto&) {
    if (avx512_)
      a_.vrndscaleps(ta, ta, 0x08);  // nearest, no precision exception
    else
      a_.vroundps(ta, ta, 0x08);
  });
  each([&](auto& z, auto& ta, auto&) { a_.vfnmadd231ps(z, ta, cst(kLn2Hi)); });
  each([&](auto& z, auto& ta, auto&) { a_.vfnmadd231ps(z, ta, cst(kLn2Lo)); });
  each([&](auto&, auto&, auto& tb) { a_.vmovaps(tb, cst(kExpP0)); });
  for (int i = 1; i < 8; ++i)
    each([&](auto& z, auto&, auto& tb) { a_.vfmadd213ps(tb, z, cst(ConstId(kExpP0 + i))); });
  if (avx512_) {
    each([&](auto& z, auto& ta, auto& tb) { a_.vscalefps(z, tb, ta); });
  } else {
    each([&](auto&, auto& ta, auto&) { a_.vcvtps2dq(ta, ta); });
    each([&](auto&, auto& ta, auto&) { a_.vpslld(ta, ta, 23); });
    each([&](auto& z, auto& ta, auto& tb) { a_.vpaddd(z, tb, ta); });
  }
}

int VecEmitter::act_temps(Activation act) {
  switch (act) {
    case Activation::none:
    case Activation::relu:
      return 0;
    case Activation::silu:
    case Activation::gelu_tanh:
      return 3;
    case Activation::gelu:
      return 4;
  }
  return 4;
}

void VecEmitter::activation(std::span<const ActLane> lanes, Activation act) {
  // One instruction for every lane before the next: each lane's chain is tens of dependent ops,
  // and independent chains side by side keep the vector units busy instead of waiting on latency.
  auto each = [&](auto&& emit) {
    for (const ActLane& l : lanes) emit(l.x, l.t);
  };
  switch (act) {
    case Activation::none:
      return;
    case Activation::relu:
      each([&](auto& x, auto) { a_.vmaxps(x, x, cst(kZero)); });
      return;
    case Activation::silu:  // x / (1 + e^-x)
      each([&](auto& x, auto t) { a_.vmulps(t[0], x, cst(kNegOne)); });
      exp_lanes(lanes, 0, 1, 2);
      each([&](auto&, auto t) { a_.vaddps(t[0], t[0], cst(kOne)); });
      each([&](auto& x, auto t) { a_.vdivps(x, x, t[0]); });
      return;
    case Activation::gelu_tanh:  // x / (1 + e^{x (-K - K A x^2)})
      each([&](auto& x, auto t) { a_.vmulps(t[0], x, x); });
      each([&](auto&, auto t) { a_.vmulps(t[0], t[0], cst(kGeluTanhNegKA)); });
      each([&](auto&, auto t) { a_.vaddps(t[0], t[0], cst(kGeluTanhNegK)); });
      each([&](auto& x, auto t) { a_.vmulps(t[0], t[0], x); });
      exp_lanes(lanes, 0, 1, 2);
      each([&](auto&, auto t) { a_.vaddps(t[0], t[0], cst(kOne)); });
      each([&](auto& x, auto t) { a_.vdivps(x, x, t[0]); });
      return;
    case Activation::gelu: {  // x (1/2 + x P'(x^2) / Q'(x^2)), x clamped in the ratio; 19 ops
      // (An A&S 7.1.26 erf with an exp took ~40, and its e^{-x^2/2} went denormal past |x| = 13.
      // The same ratio in y = x / sqrt 2 took two more multiplies, on the pipes the FMAs use.)
      each([&](auto& x, auto t) { a_.vmaxps(t[0], x, cst(kGeluClampLo)); });
      each([&](auto&, auto t) { a_.vminps(t[0], t[0], cst(kGeluClampHi)); });  // x clamped
      each([&](auto&, auto t) { a_.vmulps(t[1], t[0], t[0]); });               // its square
      each([&](auto&, auto t) { a_.vmovaps(t[2], cst(kGeluP0)); });
      for (int i = 1; i <= kGeluP6 - kGeluP0; ++i)
        each([&](auto&, auto t) { a_.vfmadd213ps(t[2], t[1], cst(ConstId(kGeluP0 + i))); });
      each([&](auto&, auto t) { a_.vmulps(t[2], t[2], t[0]); });  // x P'(x^2)
      each([&](auto&, auto t) { a_.vmovaps(t[3], cst(kGeluQ0)); });
      for (int i = 1; i <= kGeluQ4 - kGeluQ0; ++i)
        each([&](auto&, auto t) { a_.vfmadd213ps(t[3], t[1], cst(ConstId(kGeluQ0 + i))); });
      each([&](auto&, auto t) { a_.vdivps(t[2], t[2], t[3]); });  // erf(y) / 2
      each([&](auto&, auto t) { a_.vaddps(t[2], t[2], cst(kHalf)); });
      each([&](auto& x, auto t) { a_.vmulps(x, x, t[2]); });
      return;
    }
  }
}

void VecEmitter::activation(const ax::Vec& x, Activation act, const ax::Vec t[4]) {
  const ActLane lane{x, {t[0], t[1], t[2], t[3]}};
  activation(std::span<const ActLane>(&lane, 1), act);
}

void VecEmitter::activation_pass(std::span<const TileItem> items, Activation act, int64_t residual,
                                 int first_reg) {
  const bool masked =
      std::any_of(items.begin(), items.end(), [&](const TileItem& it) { return it.n < lanes(); });
  // AVX2's partial vectors need a spare register: the residual's partial load goes through it
  // (residual_mem), and so does the high half of a store of 5-7 lanes (store_masked).
  const int last_reg = num_regs() - (masked && !avx512_ ? 1 : 0);
  const ax::Vec spare = vec(num_regs() - 1);
  const int per_lane = 1 + std::max(1, act_temps(act));
  const size_t group = size_t(std::max(1, (last_reg - first_reg) / per_lane));
  KILN_CHECK(first_reg + per_lane <= last_reg) << "no registers for the activation pass";
  std::vector<ActLane> group_lanes;
  for (size_t g0 = 0; g0 < items.size(); g0 += group) {
    const size_t n = std::min(group, items.size() - g0);
    group_lanes.clear();
    for (size_t l = 0; l < n; ++l) {
      const int r = first_reg + int(l) * per_lane;
      ActLane lane{vec(r), {}};
      for (int i = 0; i < 4; ++i) lane.t[i] = vec(r + 1 + std::min(i, per_lane - 2));  // unused
      group_lanes.push_back(lane);  // past act_temps(act)
    }
    for (size_t l = 0; l < n; ++l) load_masked(group_lanes[l].x, items[g0 + l].c, items[g0 + l].n);
    activation(group_lanes, act);
    for (size_t l = 0; l < n; ++l) {
      residual_mem(residual, group_lanes[l].x, items[g0 + l].residual, items[g0 + l].n, spare);
      store_masked(items[g0 + l].c, group_lanes[l].x, items[g0 + l].n, spare);
    }
  }
}

void VecEmitter::epilogue(const ax::Vec& x, const Epilogue& e, int n, const ax::Vec t[4]) {
  if (e.scale) {
    if (avx512_) {
      a_.vmulps(x, x, ax::Mem(e.scale_mem)._1to16());
    } else {
      a_.vbroadcastss(t[0], e.scale_mem);
      a_.vmulps(x, x, t[0]);
    }
  }
  if (e.col_scale && e.bias_broadcast) {
    a_.vbroadcastss(t[0], e.col_scale_mem);
    a_.vmulps(x, x, t[0]);
  } else if (e.col_scale) {
    mul_mem(x, e.col_scale_mem, n, t[0]);
  }
  if (e.bias && e.bias_broadcast) {
    a_.vbroadcastss(t[0], e.bias_mem);
    a_.vaddps(x, x, t[0]);
  } else if (e.bias) {
    add_mem(x, e.bias_mem, n, t[0]);
  }
  activation(x, e.act, t);
  residual_mem(e.residual, x, e.residual_mem, n, t[0]);
}

}  // namespace kiln::x86
