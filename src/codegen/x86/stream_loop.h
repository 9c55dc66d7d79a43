// The K loop the stream kernels share (stream_kernel.cpp, stream_rows_kernel.cpp).
#pragma once

#include "codegen/x86/kernel_registry.h"

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

}  // namespace kiln::x86
