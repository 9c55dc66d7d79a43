// One element's value in LLVM IR: how each dtype is stored and computed (float16 and bfloat16
// are computed in float32 and rounded only by casts and stores), conversions between them, and
// each elementwise op and reduction step on a value. Loop nests live in lower_group.cpp.
#pragma once

#include "ir/op.h"
#include "kiln/dtype.h"

#include <llvm/IR/IRBuilder.h>

namespace kiln::llvmjit {

// The type a value of `t` has in memory, and the type it is computed in.
llvm::Type* storage_type(llvm::IRBuilder<>& b, DType t);
llvm::Type* compute_type(llvm::IRBuilder<>& b, DType t);

// Stored value -> computed value, and back (bfloat16 rounds to nearest even).
llvm::Value* to_compute(llvm::IRBuilder<>& b, llvm::Value* v, DType t);
llvm::Value* from_compute(llvm::IRBuilder<>& b, llvm::Value* v, DType t);
// Rounds a computed value to what `t` can hold (a no-op but for float16/bfloat16).
llvm::Value* round_to(llvm::IRBuilder<>& b, llvm::Value* v, DType t);
llvm::Value* compute_constant(llvm::IRBuilder<>& b, double v, DType t);

// `op` on computed values; `t` is the unary's dtype, `in_t` the binary's operands' dtype.
llvm::Value* emit_unary(llvm::IRBuilder<>& b, ir::Op op, DType t, llvm::Value* x);
llvm::Value* emit_binary(llvm::IRBuilder<>& b, ir::Op op, DType in_t, llvm::Value* a,
                         llvm::Value* c);
llvm::Value* emit_cast(llvm::IRBuilder<>& b, llvm::Value* v, DType from, DType to);
llvm::Value* float_to_int_wrapping(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Type* dst);

// A reduction `op` of dtype `t`: its identity, and one step acc (op) x.
llvm::Value* reduce_init(llvm::IRBuilder<>& b, ir::Op op, DType t);
llvm::Value* reduce_combine(llvm::IRBuilder<>& b, ir::Op op, DType t, llvm::Value* acc,
                            llvm::Value* x);

// Where a reduction's running value is kept across blocks of its elements: a float sum or mean
// in double (partial sums of a block are float32; their total is not rounded to float32 until
// the end, so 10^7 terms lose no more than a block does), any other reduction in its compute
// type. `accumulate` adds a computed value (or a block's partial) to it.
llvm::Type* accumulator_type(llvm::IRBuilder<>& b, ir::Op op, DType t);
llvm::Value* accumulator_init(llvm::IRBuilder<>& b, ir::Op op, DType t);
llvm::Value* accumulate(llvm::IRBuilder<>& b, ir::Op op, DType t, llvm::Value* acc, llvm::Value* x);

}  // namespace kiln::llvmjit
