// What the stream kernels share (stream_kernel.cpp, stream_rows_kernel.cpp): their K loop and
// their epilogue's operands.
#pragma once

#include "codegen/x86/kernel_registry.h"
#include "codegen/x86/vec_emit.h"

#include <asmjit/x86.h>

#include <cstddef>
#include <cstdint>

namespace kiln::x86 {

// The stream kernels' passes of kStreamRowsPerPass rows of B: KernelArgs::kc / kStreamRowsPerPass
// of them, then kc % kStreamRowsPerPass of one row. pass(rows) emits one pass and moves A's and
// B's pointers past its rows; cnt counts the passes left down to 1 (the pass may read it).
inline constexpr int kStreamRowsPerPass = 4;
template <class Pass>
void emit_stream_k_loop(asmjit::x86::Assembler& a, const asmjit::x86::Gp& args,
                        const asmjit::x86::Gp& cnt, Pass&& pass) {
  const asmjit::x86::Mem kc = asmjit::x86::ptr(args, int32_t(offsetof(KernelArgs, kc)));
  asmjit::Label whole = a.newLabel(), single = a.newLabel(), singles = a.newLabel(),
                done = a.newLabel();
  a.mov(cnt, kc);
  a.shr(cnt, 2);
  a.jz(singles);
  a.bind(whole);
  pass(kStreamRowsPerPass);
  a.dec(cnt);
  a.jnz(whole);
  a.bind(singles);
  a.mov(cnt, kc);
  a.and_(cnt, kStreamRowsPerPass - 1);
  a.jz(done);
  a.bind(single);
  pass(1);
  a.dec(cnt);
  a.jnz(single);
  a.bind(done);
}

// The epilogue d asks for, applied to C's vectors: scale from args, bias, column scale and
// residual at the pointers in bias, cs and res (bias and column scale one value for every column
// where d.bias_bcast).
inline VecEmitter::Epilogue stream_epilogue(const KernelDesc& d, const asmjit::x86::Gp& args,
                                            const asmjit::x86::Gp& bias, const asmjit::x86::Gp& cs,
                                            const asmjit::x86::Gp& res) {
  namespace ax = asmjit::x86;
  VecEmitter::Epilogue e;
  e.scale = d.has_scale;
  e.scale_mem = ax::dword_ptr(args, int32_t(offsetof(KernelArgs, scale)));
  e.bias = d.has_bias;
  e.bias_broadcast = d.bias_bcast != 0;
  e.act = Activation(d.act);
  e.residual = d.has_residual;
  e.bias_mem = d.bias_bcast ? ax::dword_ptr(bias) : ax::ptr(bias);
  e.col_scale = d.has_col_scale;
  e.col_scale_mem = d.bias_bcast ? ax::dword_ptr(cs) : ax::ptr(cs);
  e.residual_mem = ax::ptr(res);
  return e;
}

}  // namespace kiln::x86
