// ISA-neutral helpers the GEMM generators share: vector registers by index, a table of constants
// addressed from one register, partial loads/stores for edge tiles (AVX-512 k1, AVX2 xmm moves)
// and the epilogue (scale, bias, activation, residual) applied to one accumulator in registers.
#pragma once

#include "codegen/x86/gemm.h"

#include <asmjit/x86.h>

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::x86 {

namespace ax = asmjit::x86;

// The constant table's address: the one absolute address generated code holds, as the 64-bit
// immediate of load_const_base()'s movabs. asmjit records no relocation for it, so the disk cache
// (kernel_registry.cpp) patches it when it loads code into another process.
const void* const_table_address();
// While one is alive on a thread, load_const_base() appends to `sites` the code offset of each
// 8-byte address immediate it emits.
class ConstBaseSiteRecorder {
 public:
  explicit ConstBaseSiteRecorder(std::vector<uint64_t>* sites);
  ~ConstBaseSiteRecorder();
  ConstBaseSiteRecorder(const ConstBaseSiteRecorder&) = delete;
  ConstBaseSiteRecorder& operator=(const ConstBaseSiteRecorder&) = delete;

 private:
  std::vector<uint64_t>* prev_;
};

// Indices into the constant table (each constant replicated over 16 lanes, 64 bytes apart).
enum ConstId : int32_t {
  kZero,
  kOne,
  kHalf,
  kNegOne,
  kExpHi,
  kExpLo,
  kLog2e,
  kLn2Hi,
  kLn2Lo,
  kExpP0,  // kExpP0..kExpP7: e^r on [-ln2/2, ln2/2], Horner from the highest degree
  kExpP7 = kExpP0 + 7,
  kGeluTanhNegK,
  kGeluTanhNegKA,
  kGeluClampLo,  // gelu's x bounded to [-5.6, 5.6] in its erf (+-1 beyond; vec_emit.cpp)
  kGeluClampHi,
  kGeluP0,  // kGeluP0..kGeluP6, kGeluQ0..kGeluQ4: erf_rational.h's kP and kQ in terms of x^2
  kGeluP6 = kGeluP0 + 6,
  kGeluQ0,
  kGeluQ4 = kGeluQ0 + 4,
  kNumConsts
};

class VecEmitter {
 public:
  VecEmitter(ax::Assembler& a, bool avx512, ax::Gp const_reg)
      : a_(a), avx512_(avx512), const_reg_(const_reg) {}

  bool avx512() const { return avx512_; }
  int lanes() const { return avx512_ ? 16 : 8; }
  int num_regs() const { return avx512_ ? 32 : 16; }
  ax::Vec vec(int i) const { return avx512_ ? ax::Vec(ax::zmm(i)) : ax::Vec(ax::ymm(i)); }
  ax::Mem cst(ConstId id) const { return ax::ptr(const_reg_, int32_t(id) * 64); }

  // Loads the constant table's address (and the AVX2 mask table's) into const_reg.
  void load_const_base();
  void zero(const ax::Vec& v);

  // Edge tiles: lanes [0, n) of a vector. AVX-512 masks them with k1 (set once per tile); AVX2
  // moves exactly n floats through xmm moves (vec_emit.cpp), no mask needed.
  void set_mask(int n, const ax::Gp& scratch);
  // The AVX2 mask table (8 lanes set, then 8 clear) at index + disp bytes: lanes [0, n) at
  // (8 - n) * 4, for an n known only at run time (the dot kernels' k_align masks: vmaskmovps,
  // vtestps, and ANDs with aligned loads).
  ax::Mem mask_table(const ax::Gp& index, int32_t disp) const;
  // dst = lanes [0, n) of [m], the others zero. Reads only those n floats.
  void load_masked(const ax::Vec& dst, const ax::Mem& m, int n);
  // Lanes [0, n) of src to m; writes only those n floats. AVX2 with n > 4 clobbers tmp (which
  // must not be src).
  void store_masked(const ax::Mem& m, const ax::Vec& src, int n, const ax::Vec& tmp);
  // dst += [m] over `n` lanes (n == lanes(): plain). tmp is clobbered.
  void add_mem(const ax::Vec& dst, const ax::Mem& m, int n, const ax::Vec& tmp);
  // dst *= [m], as add_mem.
  void mul_mem(const ax::Vec& dst, const ax::Mem& m, int n, const ax::Vec& tmp);
  // dst = dst + [m] or dst * [m] (op: kResidualAdd or kResidualMul; kResidualNone: nothing).
  void residual_mem(int64_t op, const ax::Vec& dst, const ax::Mem& m, int n, const ax::Vec& tmp);

  // The epilogue tail after the sum (and C's partial sum) is in x: scale (broadcast from
  // scale_mem), column scale, bias, activation, residual. t[0..3] are free temporaries. Does not
  // store.
  struct Epilogue {
    bool scale = false;
    ax::Mem scale_mem;
    bool col_scale = false;
    ax::Mem col_scale_mem;
    bool bias = false;
    // One value at bias_mem (and col_scale_mem) for every lane.
    bool bias_broadcast = false;
    ax::Mem bias_mem;
    Activation act = Activation::none;
    int64_t residual = kResidualNone;  // ResidualOp
    ax::Mem residual_mem;
  };
  void epilogue(const ax::Vec& x, const Epilogue& e, int n, const ax::Vec t[4]);
  void activation(const ax::Vec& x, Activation act, const ax::Vec t[4]);

  // One value of an activation group and its temporaries (t[act_temps(act)..] unused).
  struct ActLane {
    ax::Vec x;
    ax::Vec t[4];
  };
  static int act_temps(Activation act);
  // The activation of every lane, emitted one instruction across all lanes before the next: one
  // lane's chain is ~20 dependent ops (gelu's with a divide, silu's with an exp), so a tile done a
  // vector at a time waits on latency; independent lanes side by side fill the pipeline.
  void activation(std::span<const ActLane> lanes, Activation act);
  // Activations that are worth a second pass over the tile (everything but relu).
  static bool needs_pass(Activation act) { return act_temps(act) > 0; }

  // The second half of a tile's epilogue, for activations needs_pass(): each item's value
  // (already stored at `c`, scale and bias applied) is loaded, activated in groups of as many
  // lanes as registers [first_reg, num_regs()) hold, the residual (ResidualOp) applied, and stored
  // back.
  struct TileItem {
    ax::Mem c;
    ax::Mem residual;
    int n = 0;  // valid lanes
  };
  void activation_pass(std::span<const TileItem> items, Activation act, int64_t residual,
                       int first_reg);

 private:
  void exp_lanes(std::span<const ActLane> lanes, int zi, int ai, int bi);

  ax::Assembler& a_;
  bool avx512_;
  ax::Gp const_reg_;
};

}  // namespace kiln::x86
