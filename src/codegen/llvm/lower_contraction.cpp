// The contraction kernels of the LLVM path: matmul and conv2d loop nests with their epilogue
// applied at each element before it is stored. (float32 matmul groups go to the asmjit backend
// first; these loop nests serve the other dtypes, conv2d, and what that backend declines.)
#include "codegen/llvm/emit_scalar.h"
#include "codegen/llvm/lower_group_emitter.h"

namespace kiln::llvmjit {

void Emitter::emit_matmul() {
  const Node& mm = *g_.contraction;
  const ir::Shape& out_dims = mm.shape;
  size_t nb = out_dims.size() - 2;
  Value* m = dimv(out_dims[nb]);
  Value* n = dimv(out_dims[nb + 1]);
  Value* k = dimv(mm.inputs[0]->shape.back());
  ir::Shape batch_dims(out_dims.begin(), out_dims.begin() + nb);
  const Node* a = mm.inputs[0].get();
  const Node* bm = mm.inputs[1].get();
  DType t = mm.dtype;
  bool accumulate_in_output = !(t == DType::f16 || t == DType::bf16) && out_storage_ == t;
  llvm::Type* st = storage_type(b_, t);
  loop(begin_, end_, {}, [&](Value* u, const std::vector<Value*>&) {
    Value* bidx = b_.CreateUDiv(u, m);
    Value* i = b_.CreateURem(u, m);
    Idx bi = batch_dims.empty() ? Idx{} : delinearize(bidx, batch_dims);
    Value* row_base = b_.CreateMul(u, n);
    auto at = [&](Idx base, Value* r, Value* c) {
      base.push_back(r);
      base.push_back(c);
      return base;
    };
    if (accumulate_in_output) {
      loop(b_.getInt64(0), n, {}, [&](Value* j, const std::vector<Value*>&) {
        b_.CreateStore(from_compute(b_, compute_constant(b_, 0, t), t),
                       b_.CreateInBoundsGEP(st, out_ptr_, b_.CreateAdd(row_base, j)));
        return std::vector<Value*>{};
      });
      loop(b_.getInt64(0), k, {}, [&](Value* kk, const std::vector<Value*>&) {
        Value* av = emit(a, at(bi, i, kk));
        loop(b_.getInt64(0), n, {}, [&](Value* j, const std::vector<Value*>&) {
          Value* p = b_.CreateInBoundsGEP(st, out_ptr_, b_.CreateAdd(row_base, j));
          Value* bv = emit(bm, at(bi, kk, j));
          Value* cur = b_.CreateLoad(st, p);
          Value* r = is_floating(t) ? fma(av, bv, cur) : b_.CreateAdd(cur, b_.CreateMul(av, bv));
          b_.CreateStore(r, p);
          return std::vector<Value*>{};
        });
        return std::vector<Value*>{};
      });
      if (g_.root.get() != g_.contraction.get()) {
        loop(b_.getInt64(0), n, {}, [&](Value* j, const std::vector<Value*>&) {
          Value* off = b_.CreateAdd(row_base, j);
          Value* v = to_compute(b_, b_.CreateLoad(st, b_.CreateInBoundsGEP(st, out_ptr_, off)), t);
          store_epilogue(v, at(bi, i, j), off);
          return std::vector<Value*>{};
        });
      }
    } else {
      loop(b_.getInt64(0), n, {}, [&](Value* j, const std::vector<Value*>&) {
        std::vector<Value*> acc = loop(b_.getInt64(0), k, {compute_constant(b_, 0, t)},
                                       [&](Value* kk, const std::vector<Value*>& cur) {
                                         Value* av = emit(a, at(bi, i, kk));
                                         Value* bv = emit(bm, at(bi, kk, j));
                                         return std::vector<Value*>{fma(av, bv, cur[0])};
                                       });
        store_epilogue(acc[0], at(bi, i, j), b_.CreateAdd(row_base, j));
        return std::vector<Value*>{};
      });
    }
    return std::vector<Value*>{};
  });
}

Value* Emitter::fma(Value* a, Value* c, Value* acc) {
  auto* mul = llvm::cast<llvm::Instruction>(b_.CreateFMul(a, c));
  auto* add = llvm::cast<llvm::Instruction>(b_.CreateFAdd(acc, mul));
  llvm::FastMathFlags fmf;
  fmf.setAllowContract();
  mul->setFastMathFlags(fmf);
  add->setFastMathFlags(fmf);
  return add;
}

Value* Emitter::ceil_div_clamped(Value* num, int64_t den) {
  Value* pos = b_.CreateSDiv(b_.CreateAdd(num, b_.getInt64(den - 1)), b_.getInt64(den));
  return b_.CreateSelect(b_.CreateICmpSLE(num, b_.getInt64(0)), b_.getInt64(0), pos);
}

Value* Emitter::floor_div_plus1_clamped(Value* num, int64_t den, int64_t limit) {
  Value* v = b_.CreateAdd(b_.CreateSDiv(num, b_.getInt64(den)), b_.getInt64(1));
  v = b_.CreateSelect(b_.CreateICmpSLT(num, b_.getInt64(0)), b_.getInt64(0), v);
  return b_.CreateSelect(b_.CreateICmpSGT(v, b_.getInt64(limit)), b_.getInt64(limit), v);
}

void Emitter::emit_conv2d() {
  const Node& cv = *g_.contraction;
  auto out = ir::concrete_dims(cv.shape);
  auto xs = ir::concrete_dims(cv.inputs[0]->shape);
  auto ws = ir::concrete_dims(cv.inputs[1]->shape);
  const Conv2dParams& p = cv.attrs.conv;
  int64_t groups = p.groups, cg = ws[1], og = ws[0] / groups;
  const Node* x = cv.inputs[0].get();
  const Node* w = cv.inputs[1].get();
  DType t = cv.dtype;
  llvm::Type* st = storage_type(b_, t);
  // Accumulate in the output plane when it holds the conv's own dtype (f16/bf16 accumulate in
  // float32 registers instead): for each tap, the (oh, ow) ranges that read inside the input
  // are computed up front, so the inner ow loop has no bounds checks and vectorizes.
  bool in_output = !(t == DType::f16 || t == DType::bf16) && out_storage_ == t;
  loop(begin_, end_, {}, [&](Value* u, const std::vector<Value*>&) {
    Value* nimg = b_.CreateUDiv(u, b_.getInt64(out[1]));
    Value* oc = b_.CreateURem(u, b_.getInt64(out[1]));
    Value* cbase = b_.CreateMul(b_.CreateUDiv(oc, b_.getInt64(og)), b_.getInt64(cg));
    Value* plane = b_.CreateMul(u, b_.getInt64(out[2] * out[3]));
    if (in_output) {
      loop(b_.getInt64(0), b_.getInt64(out[2] * out[3]), {},
           [&](Value* e, const std::vector<Value*>&) {
             b_.CreateStore(from_compute(b_, compute_constant(b_, 0, t), t),
                            b_.CreateInBoundsGEP(st, out_ptr_, b_.CreateAdd(plane, e)));
             return std::vector<Value*>{};
           });
      loop(b_.getInt64(0), b_.getInt64(cg), {}, [&](Value* c, const std::vector<Value*>&) {
        return loop(
            b_.getInt64(0), b_.getInt64(ws[2]), {}, [&](Value* kh, const std::vector<Value*>&) {
              return loop(
                  b_.getInt64(0), b_.getInt64(ws[3]), {},
                  [&](Value* kw, const std::vector<Value*>&) {
                    Value* wv = emit(w, {oc, c, kh, kw});
                    Value* hoff = b_.CreateSub(b_.CreateMul(kh, b_.getInt64(p.dilation[0])),
                                               b_.getInt64(p.padding[0]));
                    Value* woff = b_.CreateSub(b_.CreateMul(kw, b_.getInt64(p.dilation[1])),
                                               b_.getInt64(p.padding[1]));
                    // ih = oh*s + hoff in [0, H)  <=>  oh in [ceil(-hoff/s), floor((H-1-hoff)/s)]
                    Value* oh_lo = ceil_div_clamped(b_.CreateNeg(hoff), p.stride[0]);
                    Value* oh_hi = floor_div_plus1_clamped(
                        b_.CreateSub(b_.getInt64(xs[2] - 1), hoff), p.stride[0], out[2]);
                    Value* ow_lo = ceil_div_clamped(b_.CreateNeg(woff), p.stride[1]);
                    Value* ow_hi = floor_div_plus1_clamped(
                        b_.CreateSub(b_.getInt64(xs[3] - 1), woff), p.stride[1], out[3]);
                    return loop(oh_lo, oh_hi, {}, [&](Value* oh, const std::vector<Value*>&) {
                      Value* ih = b_.CreateAdd(b_.CreateMul(oh, b_.getInt64(p.stride[0])), hoff);
                      Value* row = b_.CreateAdd(plane, b_.CreateMul(oh, b_.getInt64(out[3])));
                      return loop(ow_lo, ow_hi, {}, [&](Value* ow, const std::vector<Value*>&) {
                        Value* iw = b_.CreateAdd(b_.CreateMul(ow, b_.getInt64(p.stride[1])), woff);
                        Value* xv = emit(x, {nimg, b_.CreateAdd(cbase, c), ih, iw});
                        Value* ptr = b_.CreateInBoundsGEP(st, out_ptr_, b_.CreateAdd(row, ow));
                        Value* cur = to_compute(b_, b_.CreateLoad(st, ptr), t);
                        Value* r = is_floating(t) ? fma(xv, wv, cur)
                                                  : b_.CreateAdd(cur, b_.CreateMul(xv, wv));
                        b_.CreateStore(from_compute(b_, r, t), ptr);
                        return std::vector<Value*>{};
                      });
                    });
                  });
            });
      });
      if (g_.root.get() != g_.contraction.get()) {
        loop(b_.getInt64(0), b_.getInt64(out[2]), {}, [&](Value* oh, const std::vector<Value*>&) {
          return loop(
              b_.getInt64(0), b_.getInt64(out[3]), {}, [&](Value* ow, const std::vector<Value*>&) {
                Value* off =
                    b_.CreateAdd(plane, b_.CreateAdd(b_.CreateMul(oh, b_.getInt64(out[3])), ow));
                Value* v =
                    to_compute(b_, b_.CreateLoad(st, b_.CreateInBoundsGEP(st, out_ptr_, off)), t);
                store_epilogue(v, {nimg, oc, oh, ow}, off);
                return std::vector<Value*>{};
              });
        });
      }
      return std::vector<Value*>{};
    }
    loop(b_.getInt64(0), b_.getInt64(out[2]), {}, [&](Value* oh, const std::vector<Value*>&) {
      loop(b_.getInt64(0), b_.getInt64(out[3]), {}, [&](Value* ow, const std::vector<Value*>&) {
        std::vector<Value*> acc = loop(
            b_.getInt64(0), b_.getInt64(cg), {compute_constant(b_, 0, t)},
            [&](Value* c, const std::vector<Value*>& a0) {
              return loop(
                  b_.getInt64(0), b_.getInt64(ws[2]), a0,
                  [&](Value* kh, const std::vector<Value*>& a1) {
                    return loop(
                        b_.getInt64(0), b_.getInt64(ws[3]), a1,
                        [&](Value* kw, const std::vector<Value*>& a2) {
                          Value* ih = b_.CreateAdd(
                              b_.CreateMul(oh, b_.getInt64(p.stride[0])),
                              b_.CreateSub(b_.CreateMul(kh, b_.getInt64(p.dilation[0])),
                                           b_.getInt64(p.padding[0])));
                          Value* iw = b_.CreateAdd(
                              b_.CreateMul(ow, b_.getInt64(p.stride[1])),
                              b_.CreateSub(b_.CreateMul(kw, b_.getInt64(p.dilation[1])),
                                           b_.getInt64(p.padding[1])));
                          Value* inb = b_.CreateAnd(b_.CreateICmpULT(ih, b_.getInt64(xs[2])),
                                                    b_.CreateICmpULT(iw, b_.getInt64(xs[3])));
                          Value* ihc = b_.CreateSelect(inb, ih, b_.getInt64(0));
                          Value* iwc = b_.CreateSelect(inb, iw, b_.getInt64(0));
                          Value* xv = emit(x, {nimg, b_.CreateAdd(cbase, c), ihc, iwc});
                          xv = b_.CreateSelect(inb, xv, compute_constant(b_, 0, t));
                          Value* wv = emit(w, {oc, c, kh, kw});
                          Value* r = is_floating(t) ? fma(xv, wv, a2[0])
                                                    : b_.CreateAdd(a2[0], b_.CreateMul(xv, wv));
                          return std::vector<Value*>{r};
                        });
                  });
            });
        Value* off = b_.CreateAdd(plane, b_.CreateAdd(b_.CreateMul(oh, b_.getInt64(out[3])), ow));
        store_epilogue(acc[0], {nimg, oc, oh, ow}, off);
        return std::vector<Value*>{};
      });
      return std::vector<Value*>{};
    });
    return std::vector<Value*>{};
  });
}

}  // namespace kiln::llvmjit
