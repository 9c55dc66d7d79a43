#include "codegen/llvm/emit_scalar.h"

#include "codegen/llvm/emit_math.h"
#include "support/check.h"

#include <llvm/IR/Intrinsics.h>

namespace kiln::llvmjit {

using ir::Op;
using llvm::Value;

namespace {
bool is_float_compute(DType t) { return is_floating(t); }

// The integer part of base ** e for a negative e (numpy refuses it; this is the interpreter's
// wrapping_pow rule): 1 for a base of 1, +-1 for -1, 0 for any other base.
Value* negative_int_pow(llvm::IRBuilder<>& b, Value* base, Value* e) {
  llvm::Type* t = base->getType();
  Value* one = llvm::ConstantInt::get(t, 1);
  Value* minus_one = llvm::ConstantInt::getSigned(t, -1);
  Value* odd = b.CreateTrunc(e, b.getInt1Ty());
  return b.CreateSelect(
      b.CreateICmpEQ(base, one), one,
      b.CreateSelect(b.CreateICmpEQ(base, minus_one), b.CreateSelect(odd, minus_one, one),
                     llvm::ConstantInt::get(t, 0)));
}

// numpy's integer power, wrapping in the element type: square and multiply over the exponent's
// bits. int8 and int32 walk every bit without branches (the element loop still vectorizes, and a
// constant exponent folds to its multiplies); int64, whose vector multiply x86 lacks, loops only
// over the exponent's significant bits, as numpy does.
Value* emit_int_pow(llvm::IRBuilder<>& b, Value* base, Value* e) {
  llvm::Type* t = base->getType();
  const unsigned bits = t->getScalarSizeInBits();
  const auto k = [&](uint64_t v) { return llvm::ConstantInt::get(t, v); };
  if (bits == 1) return b.CreateOr(base, b.CreateNot(e));  // bool ** bool
  Value* negative = b.CreateICmpSLT(e, k(0));
  Value* r = k(1);
  if (bits < 64) {
    Value* square = base;
    for (unsigned i = 0; i + 1 < bits; ++i) {  // the sign bit is the negative case
      if (i) square = b.CreateMul(square, square);
      Value* bit_set = b.CreateICmpNE(b.CreateAnd(e, k(uint64_t{1} << i)), k(0));
      r = b.CreateSelect(bit_set, b.CreateMul(r, square), r);
    }
  } else {
    Value* bits_of_e = b.CreateSelect(negative, k(0), e);
    llvm::BasicBlock* pre = b.GetInsertBlock();
    auto* step = llvm::BasicBlock::Create(b.getContext(), "ipow", pre->getParent());
    auto* done = llvm::BasicBlock::Create(b.getContext(), "ipow_done", pre->getParent());
    b.CreateBr(step);
    b.SetInsertPoint(step);
    llvm::PHINode* acc = b.CreatePHI(t, 2);
    llvm::PHINode* square = b.CreatePHI(t, 2);
    llvm::PHINode* rest = b.CreatePHI(t, 2);  // the exponent's bits not yet applied
    acc->addIncoming(k(1), pre);
    square->addIncoming(base, pre);
    rest->addIncoming(bits_of_e, pre);
    Value* bit_set = b.CreateTrunc(rest, b.getInt1Ty());
    r = b.CreateSelect(bit_set, b.CreateMul(acc, square), acc);
    Value* rest_next = b.CreateLShr(rest, k(1));
    acc->addIncoming(r, step);
    square->addIncoming(b.CreateMul(square, square), step);
    rest->addIncoming(rest_next, step);
    b.CreateCondBr(b.CreateICmpNE(rest_next, k(0)), step, done);
    b.SetInsertPoint(done);
  }
  return b.CreateSelect(negative, negative_int_pow(b, base, e), r);
}
}  // namespace

llvm::Type* storage_type(llvm::IRBuilder<>& b, DType t) {
  switch (t) {
    case DType::f32:
      return b.getFloatTy();
    case DType::f64:
      return b.getDoubleTy();
    case DType::f16:
      return b.getHalfTy();
    case DType::bf16:
      return b.getInt16Ty();
    case DType::i8:
      return b.getInt8Ty();
    case DType::i32:
      return b.getInt32Ty();
    case DType::i64:
      return b.getInt64Ty();
    case DType::boolean:
      return b.getInt8Ty();
  }
  return nullptr;
}
llvm::Type* compute_type(llvm::IRBuilder<>& b, DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return b.getFloatTy();
    case DType::f64:
      return b.getDoubleTy();
    case DType::i8:
      return b.getInt8Ty();
    case DType::i32:
      return b.getInt32Ty();
    case DType::i64:
      return b.getInt64Ty();
    case DType::boolean:
      return b.getInt1Ty();
  }
  return nullptr;
}
Value* to_compute(llvm::IRBuilder<>& b, Value* v, DType t) {
  switch (t) {
    case DType::f16:
      return b.CreateFPExt(v, b.getFloatTy());
    case DType::bf16:
      return b.CreateBitCast(b.CreateShl(b.CreateZExt(v, b.getInt32Ty()), 16), b.getFloatTy());
    case DType::boolean:
      return b.CreateICmpNE(v, b.getInt8(0));
    default:
      return v;
  }
}
Value* from_compute(llvm::IRBuilder<>& b, Value* v, DType t) {
  switch (t) {
    case DType::f16:
      return b.CreateFPTrunc(v, b.getHalfTy());
    case DType::bf16: {
      // Round to nearest even; NaN stays a quiet NaN.
      Value* bits = b.CreateBitCast(v, b.getInt32Ty());
      Value* lsb = b.CreateAnd(b.CreateLShr(bits, 16), b.getInt32(1));
      Value* rounded = b.CreateLShr(b.CreateAdd(bits, b.CreateAdd(lsb, b.getInt32(0x7fff))), 16);
      Value* nan = b.CreateOr(b.CreateLShr(bits, 16), b.getInt32(0x40));
      Value* r = b.CreateSelect(b.CreateFCmpUNO(v, v), nan, rounded);
      return b.CreateTrunc(r, b.getInt16Ty());
    }
    case DType::boolean:
      return b.CreateZExt(v, b.getInt8Ty());
    default:
      return v;
  }
}
// Rounds a compute value to what `t` can hold. float16/bfloat16 values are computed in float32
// across a fused chain and rounded only by casts and when stored (the interpreter's contract).
Value* round_to(llvm::IRBuilder<>& b, Value* v, DType t) {
  if (t == DType::f16 || t == DType::bf16) return to_compute(b, from_compute(b, v, t), t);
  return v;
}
Value* compute_constant(llvm::IRBuilder<>& b, double v, DType t) {
  llvm::Type* ty = compute_type(b, t);
  if (is_float_compute(t)) return llvm::ConstantFP::get(ty, v);
  if (t == DType::boolean) return b.getInt1(v != 0);
  return llvm::ConstantInt::get(ty, static_cast<uint64_t>(static_cast<int64_t>(v)), true);
}

Value* emit_unary(llvm::IRBuilder<>& b, Op op, DType t, Value* x) {
  bool fl = is_float_compute(t);
  switch (op) {
    case Op::Neg:
      return fl ? b.CreateFNeg(x) : b.CreateNeg(x);
    case Op::Abs:
      if (fl) return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      if (t == DType::boolean) return x;
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b.getFalse());
    case Op::Exp:
      return emit_exp(b, x);
    case Op::Log:
      return emit_log(b, x);
    case Op::Sqrt:
      return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case Op::Rsqrt:
      return b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0),
                          b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
    case Op::Tanh:
      return emit_tanh(b, x);
    case Op::Sigmoid:
      return emit_sigmoid(b, x);
    case Op::Erf:
      return emit_erf(b, x);
    case Op::Relu:
      if (fl)
        return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x,
                                       llvm::ConstantFP::get(x->getType(), 0.0));
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x,
                                     llvm::ConstantInt::get(x->getType(), 0));
    case Op::Square:
      if (t == DType::boolean) return x;
      return fl ? b.CreateFMul(x, x) : b.CreateMul(x, x);
    case Op::Not:
      return b.CreateNot(x);
    default:
      break;
  }
  KILN_CHECK(false) << "unary " << ir::op_name(op);
  return nullptr;
}

Value* emit_binary(llvm::IRBuilder<>& b, Op op, DType in_t, Value* a, Value* c) {
  bool fl = is_float_compute(in_t);
  bool bl = in_t == DType::boolean;
  switch (op) {
    case Op::Add:
      return fl ? b.CreateFAdd(a, c) : b.CreateAdd(a, c);
    case Op::Sub:
      return fl ? b.CreateFSub(a, c) : b.CreateSub(a, c);
    case Op::Mul:
      return fl ? b.CreateFMul(a, c) : b.CreateMul(a, c);
    case Op::Div:
      return b.CreateFDiv(a, c);
    case Op::Pow:
      return fl ? b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, c) : emit_int_pow(b, a, c);
    case Op::Maximum:
      if (fl) return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, c);
      return bl ? b.CreateOr(a, c) : b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, c);
    case Op::Minimum:
      if (fl) return b.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, c);
      return bl ? b.CreateAnd(a, c) : b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, c);
    case Op::Lt:
      return fl ? b.CreateFCmpOLT(a, c) : bl ? b.CreateICmpULT(a, c) : b.CreateICmpSLT(a, c);
    case Op::Le:
      return fl ? b.CreateFCmpOLE(a, c) : bl ? b.CreateICmpULE(a, c) : b.CreateICmpSLE(a, c);
    case Op::Gt:
      return fl ? b.CreateFCmpOGT(a, c) : bl ? b.CreateICmpUGT(a, c) : b.CreateICmpSGT(a, c);
    case Op::Ge:
      return fl ? b.CreateFCmpOGE(a, c) : bl ? b.CreateICmpUGE(a, c) : b.CreateICmpSGE(a, c);
    case Op::Eq:
      return fl ? b.CreateFCmpOEQ(a, c) : b.CreateICmpEQ(a, c);
    case Op::Ne:
      return fl ? b.CreateFCmpUNE(a, c) : b.CreateICmpNE(a, c);
    case Op::And:
      return b.CreateAnd(a, c);
    case Op::Or:
      return b.CreateOr(a, c);
    default:
      break;
  }
  KILN_CHECK(false) << "binary " << ir::op_name(op);
  return nullptr;
}

Value* emit_cast(llvm::IRBuilder<>& b, Value* v, DType from, DType to) {
  llvm::Type* dst = compute_type(b, to);
  bool ff = is_float_compute(from), tf = is_float_compute(to);
  if (to == DType::boolean) {
    if (from == DType::boolean) return v;
    return ff ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
              : b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (ff && tf) return round_to(b, b.CreateFPCast(v, dst), to);
  if (ff) return float_to_int_wrapping(b, v, dst);
  if (tf) {
    Value* r = from == DType::boolean ? b.CreateUIToFP(v, dst) : b.CreateSIToFP(v, dst);
    return round_to(b, r, to);
  }
  if (from == DType::boolean) return b.CreateZExt(v, dst);
  return b.CreateSExtOrTrunc(v, dst);
}

// Truncates toward zero, then wraps to the integer type (NaN and +-inf give 0): numpy's
// behaviour on the values it defines, and the interpreter's rule.
Value* float_to_int_wrapping(llvm::IRBuilder<>& b, Value* v, llvm::Type* dst) {
  Value* finite = b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v),
                                  llvm::ConstantFP::getInfinity(v->getType()));
  Value* wide = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b.getInt64Ty(), v->getType()}, {v});
  wide = b.CreateSelect(finite, wide, b.getInt64(0));
  return b.CreateTrunc(wide, dst);
}

Value* reduce_init(llvm::IRBuilder<>& b, Op op, DType t) {
  bool fl = is_float_compute(t);
  switch (op) {
    case Op::ReduceSum:
    case Op::ReduceMean:
      return compute_constant(b, 0, t);
    case Op::ReduceMax:
      if (t == DType::boolean) return b.getFalse();
      return fl ? llvm::ConstantFP::getInfinity(compute_type(b, t), true)
                : llvm::ConstantInt::get(
                      compute_type(b, t),
                      llvm::APInt::getSignedMinValue(compute_type(b, t)->getIntegerBitWidth()));
    case Op::ReduceMin:
      if (t == DType::boolean) return b.getTrue();
      return fl ? llvm::ConstantFP::getInfinity(compute_type(b, t), false)
                : llvm::ConstantInt::get(
                      compute_type(b, t),
                      llvm::APInt::getSignedMaxValue(compute_type(b, t)->getIntegerBitWidth()));
    default:
      break;
  }
  KILN_CHECK(false);
  return nullptr;
}

namespace {
// maximum or minimum of floats, NaN propagated, but -0 and +0 taken as equal (either may come
// out, as in numpy's max, which returns the first of equal elements). Ordering the zeros cost two
// blends per vector on AVX2, five instructions per load in a max reduction instead of three, and
// one core streamed x.max() at 10 GB/s where a sum streams at 16.
Value* extremum_ignoring_zero_sign(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, Value* acc,
                                   Value* x) {
  auto* r = llvm::cast<llvm::Instruction>(b.CreateBinaryIntrinsic(id, acc, x));
  llvm::FastMathFlags fmf;
  fmf.setNoSignedZeros();
  r->setFastMathFlags(fmf);
  return r;
}
}  // namespace

Value* reduce_combine(llvm::IRBuilder<>& b, Op op, DType t, Value* acc, Value* x) {
  bool fl = is_float_compute(t);
  switch (op) {
    case Op::ReduceSum:
    case Op::ReduceMean:
      if (fl) {
        // Reassociation lets the vectorizer keep several partial sums (blocked summation).
        auto* add = llvm::cast<llvm::Instruction>(b.CreateFAdd(acc, x));
        llvm::FastMathFlags fmf;
        fmf.setAllowReassoc();
        add->setFastMathFlags(fmf);
        return add;
      }
      return b.CreateAdd(acc, x);
    case Op::ReduceMax:
      if (t == DType::boolean) return b.CreateOr(acc, x);
      return fl ? extremum_ignoring_zero_sign(b, llvm::Intrinsic::maximum, acc, x)
                : b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, acc, x);
    case Op::ReduceMin:
      if (t == DType::boolean) return b.CreateAnd(acc, x);
      return fl ? extremum_ignoring_zero_sign(b, llvm::Intrinsic::minimum, acc, x)
                : b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, acc, x);
    default:
      break;
  }
  KILN_CHECK(false);
  return nullptr;
}

namespace {
bool sums_floats(ir::Op op, DType t) {
  return (op == Op::ReduceSum || op == Op::ReduceMean) && is_float_compute(t);
}
}  // namespace

llvm::Type* accumulator_type(llvm::IRBuilder<>& b, Op op, DType t) {
  return sums_floats(op, t) ? b.getDoubleTy() : compute_type(b, t);
}

Value* accumulator_init(llvm::IRBuilder<>& b, Op op, DType t) {
  return sums_floats(op, t) ? llvm::ConstantFP::get(b.getDoubleTy(), 0.0) : reduce_init(b, op, t);
}

Value* accumulate(llvm::IRBuilder<>& b, Op op, DType t, Value* acc, Value* x) {
  if (!sums_floats(op, t)) return reduce_combine(b, op, t, acc, x);
  return b.CreateFAdd(acc, b.CreateFPExt(x, b.getDoubleTy()));
}

}  // namespace kiln::llvmjit
