#include "codegen/llvm/emit_math.h"

#include "codegen/erf_rational.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>
#include <span>

namespace kiln::llvmjit {

namespace {

using llvm::Value;

Value* cf(llvm::IRBuilder<>& b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }

// Horner evaluation of c[0]*x^n + ... + c[n].
Value* horner(llvm::IRBuilder<>& b, Value* x, std::span<const double> coeffs) {
  Value* acc = nullptr;
  for (double c : coeffs) acc = acc ? b.CreateFAdd(b.CreateFMul(acc, x), cf(b, c)) : cf(b, c);
  return acc;
}

Value* horner(llvm::IRBuilder<>& b, Value* x, std::initializer_list<double> coeffs) {
  return horner(b, x, std::span<const double>(coeffs.begin(), coeffs.size()));
}

Value* libm_call(llvm::IRBuilder<>& b, const char* name, Value* x) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::FunctionCallee f = m->getOrInsertFunction(name, x->getType(), x->getType());
  return b.CreateCall(f, {x});
}

}  // namespace

Value* emit_exp(llvm::IRBuilder<>& b, Value* x) {
  if (x->getType()->isDoubleTy()) return b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
  // exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2/2 (Cephes expf polynomial).
  Value* xc = b.CreateMinNum(b.CreateMaxNum(x, cf(b, -87.33654)), cf(b, 88.37626));
  Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b.CreateFMul(xc, cf(b, M_LOG2E)));
  Value* r = b.CreateFSub(xc, b.CreateFMul(n, cf(b, 0.693359375)));
  r = b.CreateFSub(r, b.CreateFMul(n, cf(b, -2.12194440e-4)));
  Value* r2 = b.CreateFMul(r, r);
  Value* p = horner(b, r,
                    {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
                     1.6666665459E-1, 5.0000001201E-1});
  p = b.CreateFAdd(b.CreateFAdd(b.CreateFMul(p, r2), r), cf(b, 1.0));
  Value* ni = b.CreateFPToSI(n, b.getInt32Ty());
  Value* bits = b.CreateShl(b.CreateAdd(ni, b.getInt32(127)), 23);
  Value* y = b.CreateFMul(p, b.CreateBitCast(bits, b.getFloatTy()));
  // Saturation: exp(-inf) = 0, exp(+inf) = inf, NaN propagates.
  y = b.CreateSelect(b.CreateFCmpOLT(x, cf(b, -103.972084)), cf(b, 0.0), y);
  y = b.CreateSelect(b.CreateFCmpOGT(x, cf(b, 88.7228394)), cf(b, INFINITY), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

Value* emit_log(llvm::IRBuilder<>& b, Value* x) {
  if (x->getType()->isDoubleTy()) return b.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
  // Cephes logf: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) by a polynomial.
  llvm::Type* i32 = b.getInt32Ty();
  Value* sub = b.CreateFCmpOLT(x, cf(b, 1.17549435e-38));
  Value* xs = b.CreateSelect(sub, b.CreateFMul(x, cf(b, 8388608.0)), x);  // scale subnormals
  Value* ebias = b.CreateSelect(sub, b.getInt32(-23), b.getInt32(0));
  Value* bits = b.CreateBitCast(xs, i32);
  Value* e = b.CreateSub(b.CreateLShr(bits, 23), b.getInt32(126));
  e = b.CreateAdd(e, ebias);  // x <= 0, inf and NaN are replaced by the selects below
  Value* mbits = b.CreateOr(b.CreateAnd(bits, b.getInt32(0x807fffff)), b.getInt32(0x3f000000));
  Value* m = b.CreateBitCast(mbits, b.getFloatTy());  // in [0.5, 1)
  Value* small = b.CreateFCmpOLT(m, cf(b, 0.707106781186547524));
  Value* ef = b.CreateSIToFP(b.CreateSub(e, b.CreateZExt(small, i32)), b.getFloatTy());
  m = b.CreateSelect(small, b.CreateFSub(b.CreateFAdd(m, m), cf(b, 1.0)),
                     b.CreateFSub(m, cf(b, 1.0)));
  Value* z = b.CreateFMul(m, m);
  Value* p =
      horner(b, m,
             {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
              -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  Value* y = b.CreateFMul(b.CreateFMul(m, z), p);
  y = b.CreateFAdd(y, b.CreateFMul(ef, cf(b, -2.12194440e-4)));
  y = b.CreateFSub(y, b.CreateFMul(z, cf(b, 0.5)));
  Value* r = b.CreateFAdd(m, y);
  r = b.CreateFAdd(r, b.CreateFMul(ef, cf(b, 0.693359375)));
  // Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, NaN propagates.
  r = b.CreateSelect(b.CreateFCmpOEQ(x, cf(b, 0.0)), cf(b, -INFINITY), r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, cf(b, 0.0)), cf(b, NAN), r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, cf(b, INFINITY)), x, r);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

Value* emit_tanh(llvm::IRBuilder<>& b, Value* x) {
  if (x->getType()->isDoubleTy()) return libm_call(b, "tanh", x);
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // Small |x|: odd polynomial (Cephes tanhf); large: 1 - 2 / (exp(2|x|) + 1).
  Value* z = b.CreateFMul(x, x);
  Value* p = horner(b, z,
                    {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                     -3.33332819422E-1});
  Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  Value* e = emit_exp(b, b.CreateFMul(ax, cf(b, 2.0)));
  Value* big = b.CreateFSub(cf(b, 1.0), b.CreateFDiv(cf(b, 2.0), b.CreateFAdd(e, cf(b, 1.0))));
  big = b.CreateCopySign(big, x);
  Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, cf(b, 0.625)), small, big);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

Value* emit_erf(llvm::IRBuilder<>& b, Value* x) {
  if (x->getType()->isDoubleTy()) return libm_call(b, "erf", x);
  // erf_rational.h: y P(y^2) / Q(y^2) on [-4, 4].
  namespace er = erf_rational;
  Value* xc = b.CreateMinNum(b.CreateMaxNum(x, cf(b, -er::kClamp)), cf(b, er::kClamp));
  Value* x2 = b.CreateFMul(xc, xc);
  Value* p = b.CreateFMul(horner(b, x2, er::kP), xc);
  Value* q = horner(b, x2, er::kQ);
  Value* r = b.CreateFDiv(p, q);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

Value* emit_sigmoid(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* t = x->getType();
  Value* one = llvm::ConstantFP::get(t, 1.0);
  return b.CreateFDiv(one, b.CreateFAdd(one, emit_exp(b, b.CreateFNeg(x))));
}

}  // namespace kiln::llvmjit
