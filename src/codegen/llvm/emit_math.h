// Elementary functions emitted as straight-line LLVM IR so the loop vectorizer can widen them
// (libm calls would stay scalar). float32 versions are polynomial/rational approximations within
// a few ulp; float64 calls libm through intrinsics.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::llvmjit {

llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace kiln::llvmjit
