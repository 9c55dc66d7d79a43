#include "codegen/llvm/lower_group.h"

#include "codegen/llvm/emit_math.h"
#include "codegen/schedule.h"
#include "jit/device.h"
#include "support/check.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace kiln::llvmjit {

namespace {

using ir::Node;
using ir::Op;
using llvm::Value;
using Idx = std::vector<Value*>;

bool is_float_compute(DType t) { return is_floating(t); }

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
          DType out_storage, const ir::SymbolFacts& facts)
      : ctx_(ctx), b_(ctx), g_(g), layouts_(layouts), out_storage_(out_storage), facts_(facts) {
    mod_ = std::make_unique<llvm::Module>("kiln", ctx);
    // Let a*b+c contract to FMA (more accurate, and half the work of polynomial steps).
    llvm::FastMathFlags fmf;
    fmf.setAllowContract();
    b_.setFastMathFlags(fmf);
  }

  std::unique_ptr<llvm::Module> run() {
    llvm::Type* ptr = b_.getPtrTy();
    llvm::Type* i64 = b_.getInt64Ty();
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, i64, i64}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, kKernelSymbol, mod_.get());
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addFnAttr("no-trapping-math", "true");
    // LLVM defaults to 256-bit vectors on AVX-512 parts; kernels are throughput loops that
    // gain from the full width.
    if (cpu_info().has(CpuFeature::avx512f)) fn_->addFnAttr("prefer-vector-width", "512");
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    Value* bufs = fn_->getArg(0);
    Value* strides = fn_->getArg(1);
    load_symbols(fn_->getArg(2));
    begin_ = fn_->getArg(3);
    end_ = fn_->getArg(4);
    for (size_t j = 0; j < g_.leaves.size(); ++j) {
      leaf_index_[g_.leaves[j].get()] = static_cast<int>(j);
      leaf_ptr_.push_back(load_ptr(bufs, j));
      const Node& leaf = *g_.leaves[j];
      std::vector<Value*> st;
      if (layouts_[j].runtime_strides) {
        for (size_t d = 0; d < leaf.shape.size(); ++d) {
          Value* p = b_.CreateConstInBoundsGEP1_64(i64, strides, layouts_[j].stride_offset + d);
          st.push_back(b_.CreateLoad(i64, p));
        }
      } else {
        st = row_major(leaf.shape);
      }
      leaf_strides_.push_back(std::move(st));
    }
    out_ptr_ = load_ptr(bufs, g_.leaves.size());
    for (const auto& n : g_.nodes) in_group_.insert(n.get());
    switch (g_.kind) {
      case ir::GroupKind::elementwise:
        emit_elementwise();
        break;
      case ir::GroupKind::row_reduce:
        emit_row_reduce();
        break;
      case ir::GroupKind::matmul:
        emit_matmul();
        break;
      case ir::GroupKind::conv2d:
        emit_conv2d();
        break;
    }
    b_.CreateRetVoid();
    std::string err;
    llvm::raw_string_ostream os(err);
    KILN_CHECK(!llvm::verifyFunction(*fn_, &os)) << "invalid LLVM IR: " << os.str();
    return std::move(mod_);
  }

 private:
  // ---- extents ----------------------------------------------------------------------------
  // Symbols' extents are loaded once in the entry block (they dominate every use). A symbol known
  // to be a multiple of kSymbolMultiple is rebuilt as (v >> 4) << 4, which LLVM's known-bits
  // analysis sees, so vectorized loops over it need no remainder.
  void load_symbols(Value* dims) {
    for (int32_t sym : ir::group_symbols(g_)) {
      Value* p = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), dims, sym);
      Value* v = b_.CreateLoad(b_.getInt64Ty(), p);
      KILN_CHECK(sym < static_cast<int32_t>(facts_.size())) << "symbol without facts";
      if (facts_[sym].multiple) {
        static_assert(ir::kSymbolMultiple == 16);
        v = b_.CreateShl(b_.CreateLShr(v, 4, "", true), 4, "", true, true);
      }
      sym_[sym] = v;
    }
  }
  Value* dimv(const ir::Dim& d) {
    if (!d.is_symbolic()) return b_.getInt64(d.value);
    auto it = sym_.find(d.sym);
    KILN_CHECK(it != sym_.end()) << "symbol s" << d.sym << " not loaded";
    return it->second;
  }
  std::vector<Value*> dimvs(const ir::Shape& s) {
    std::vector<Value*> v;
    for (const ir::Dim& d : s) v.push_back(dimv(d));
    return v;
  }
  Value* mul_nsw(Value* a, Value* c) { return b_.CreateMul(a, c, "", true, true); }
  // Row-major strides of a dense buffer of this shape (size-1 and 0 dims count as 1).
  std::vector<Value*> row_major(const ir::Shape& s) {
    std::vector<Value*> st(s.size());
    Value* acc = b_.getInt64(1);
    int64_t cacc = 1;
    bool concrete = true;
    for (size_t i = s.size(); i-- > 0;) {
      st[i] = concrete ? b_.getInt64(cacc) : acc;
      if (s[i].is_symbolic()) {
        acc = mul_nsw(concrete ? b_.getInt64(cacc) : acc, dimv(s[i]));
        concrete = false;
      } else {
        const int64_t e = s[i].value > 0 ? s[i].value : 1;
        if (concrete)
          cacc *= e;
        else
          acc = mul_nsw(acc, b_.getInt64(e));
      }
    }
    return st;
  }

  // ---- types and conversions -------------------------------------------------------------
  llvm::Type* storage_type(DType t) {
    switch (t) {
      case DType::f32:
        return b_.getFloatTy();
      case DType::f64:
        return b_.getDoubleTy();
      case DType::f16:
        return b_.getHalfTy();
      case DType::bf16:
        return b_.getInt16Ty();
      case DType::i8:
        return b_.getInt8Ty();
      case DType::i32:
        return b_.getInt32Ty();
      case DType::i64:
        return b_.getInt64Ty();
      case DType::boolean:
        return b_.getInt8Ty();
    }
    return nullptr;
  }
  llvm::Type* compute_type(DType t) {
    switch (t) {
      case DType::f32:
      case DType::f16:
      case DType::bf16:
        return b_.getFloatTy();
      case DType::f64:
        return b_.getDoubleTy();
      case DType::i8:
        return b_.getInt8Ty();
      case DType::i32:
        return b_.getInt32Ty();
      case DType::i64:
        return b_.getInt64Ty();
      case DType::boolean:
        return b_.getInt1Ty();
    }
    return nullptr;
  }
  Value* to_compute(Value* v, DType t) {
    switch (t) {
      case DType::f16:
        return b_.CreateFPExt(v, b_.getFloatTy());
      case DType::bf16:
        return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, b_.getInt32Ty()), 16),
                                b_.getFloatTy());
      case DType::boolean:
        return b_.CreateICmpNE(v, b_.getInt8(0));
      default:
        return v;
    }
  }
  Value* from_compute(Value* v, DType t) {
    switch (t) {
      case DType::f16:
        return b_.CreateFPTrunc(v, b_.getHalfTy());
      case DType::bf16: {
        // Round to nearest even; NaN stays a quiet NaN.
        Value* bits = b_.CreateBitCast(v, b_.getInt32Ty());
        Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), b_.getInt32(1));
        Value* rounded =
            b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7fff))), 16);
        Value* nan = b_.CreateOr(b_.CreateLShr(bits, 16), b_.getInt32(0x40));
        Value* r = b_.CreateSelect(b_.CreateFCmpUNO(v, v), nan, rounded);
        return b_.CreateTrunc(r, b_.getInt16Ty());
      }
      case DType::boolean:
        return b_.CreateZExt(v, b_.getInt8Ty());
      default:
        return v;
    }
  }
  // Rounds a compute value to what `t` can hold. float16/bfloat16 values are computed in float32
  // across a fused chain and rounded only by casts and when stored (the interpreter's contract).
  Value* round_to(Value* v, DType t) {
    if (t == DType::f16 || t == DType::bf16) return to_compute(from_compute(v, t), t);
    return v;
  }
  Value* constant(double v, DType t) {
    llvm::Type* ty = compute_type(t);
    if (is_float_compute(t)) return llvm::ConstantFP::get(ty, v);
    if (t == DType::boolean) return b_.getInt1(v != 0);
    return llvm::ConstantInt::get(ty, static_cast<uint64_t>(static_cast<int64_t>(v)), true);
  }

  Value* load_ptr(Value* bufs, size_t j) {
    Value* p = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), bufs, j);
    return b_.CreateLoad(b_.getPtrTy(), p);
  }

  // ---- loops ------------------------------------------------------------------------------
  // for (iv = lo; iv < hi; ++iv) body(iv), carrying `carried` values through the loop.
  std::vector<Value*> loop(
      Value* lo, Value* hi, std::vector<Value*> carried,
      const std::function<std::vector<Value*>(Value*, const std::vector<Value*>&)>& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* bodybb = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2);
    iv->addIncoming(lo, pre);
    std::vector<llvm::PHINode*> phis;
    for (Value* c : carried) {
      llvm::PHINode* p = b_.CreatePHI(c->getType(), 2);
      p->addIncoming(c, pre);
      phis.push_back(p);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(iv, hi), bodybb, exit);
    b_.SetInsertPoint(bodybb);
    memo_.clear();
    std::vector<Value*> cur(phis.begin(), phis.end());
    std::vector<Value*> next = body(iv, cur);
    Value* iv_next = b_.CreateAdd(iv, b_.getInt64(1), "", true, true);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    b_.CreateBr(header);
    iv->addIncoming(iv_next, latch);
    for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
    b_.SetInsertPoint(exit);
    memo_.clear();
    return std::vector<Value*>(phis.begin(), phis.end());
  }

  // Nested loops over `axes` of `dims`, filling idx[axis]; the innermost loop is the last axis.
  std::vector<Value*> loop_nest(
      const std::vector<int64_t>& axes, const ir::Shape& dims, Idx& idx,
      std::vector<Value*> carried,
      const std::function<std::vector<Value*>(const std::vector<Value*>&)>& body,
      size_t level = 0) {
    if (level == axes.size()) return body(carried);
    int64_t ax = axes[level];
    return loop(b_.getInt64(0), dimv(dims[ax]), carried,
                [&](Value* iv, const std::vector<Value*>& cur) {
                  idx[ax] = iv;
                  return loop_nest(axes, dims, idx, cur, body, level + 1);
                });
  }

  // Splits a linear index over `dims` (row-major) into per-dim indices.
  Idx delinearize(Value* lin, const ir::Shape& dims) {
    Idx idx(dims.size());
    for (size_t i = dims.size(); i-- > 0;) {
      if (i == 0) {
        idx[i] = lin;
      } else if (ir::is_one(dims[i])) {
        idx[i] = b_.getInt64(0);
      } else {
        Value* d = dimv(dims[i]);
        idx[i] = b_.CreateURem(lin, d);
        lin = b_.CreateUDiv(lin, d);
      }
    }
    return idx;
  }

  Value* linearize(const Idx& idx, const ir::Shape& dims) {
    Value* lin = b_.getInt64(0);
    auto st = row_major(dims);
    for (size_t i = 0; i < idx.size(); ++i)
      if (!ir::is_one(dims[i])) lin = b_.CreateAdd(lin, mul_nsw(idx[i], st[i]), "", true, true);
    return lin;
  }

  // ---- values -----------------------------------------------------------------------------
  Value* load_leaf(int j, const Idx& idx) {
    const Node& leaf = *g_.leaves[j];
    Value* off = b_.getInt64(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      if (ir::is_one(leaf.shape[d])) continue;  // the only valid index is 0
      off = b_.CreateAdd(off, b_.CreateMul(idx[d], leaf_strides_[j][d]));
    }
    DType sd = layouts_[j].storage;
    llvm::Type* st = storage_type(sd);
    Value* p = b_.CreateGEP(st, leaf_ptr_[j], off);
    return to_compute(b_.CreateLoad(st, p), sd);
  }

  void store_out(Value* v, Value* offset) {
    DType t = out_storage_;
    llvm::Type* st = storage_type(t);
    b_.CreateStore(from_compute(v, t), b_.CreateInBoundsGEP(st, out_ptr_, offset));
  }

  Value* emit(const Node* n, const Idx& idx) {
    if (auto it = leaf_index_.find(n); it != leaf_index_.end()) return load_leaf(it->second, idx);
    auto key = std::make_pair(n, idx);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    Value* v = emit_uncached(*n, idx);
    memo_[key] = v;
    return v;
  }

  Value* emit_uncached(const Node& n, const Idx& idx) {
    KILN_CHECK(in_group_.count(&n))
        << "node " << ir::op_name(n.op) << " is neither computed nor a leaf";
    switch (ir::op_kind(n.op)) {
      case ir::OpKind::leaf:
        KILN_CHECK(n.op == Op::Constant && n.shape.empty());
        return constant(n.constant_at(0), n.dtype);
      case ir::OpKind::unary:
        return emit_unary(n, emit(n.inputs[0].get(), idx));
      case ir::OpKind::binary:
        return emit_binary(n, emit(n.inputs[0].get(), idx), emit(n.inputs[1].get(), idx));
      case ir::OpKind::ternary:
        return b_.CreateSelect(emit(n.inputs[0].get(), idx), emit(n.inputs[1].get(), idx),
                               emit(n.inputs[2].get(), idx));
      case ir::OpKind::cast:
        return emit_cast(emit(n.inputs[0].get(), idx), n.inputs[0]->dtype, n.dtype);
      case ir::OpKind::view:
        return emit(n.inputs[0].get(), view_index(n, idx));
      case ir::OpKind::concat:
        return emit_concat(n, idx);
      case ir::OpKind::reduce:
        return reduced_value(n, idx);
      case ir::OpKind::contraction:
        return contraction_value(n, idx);
    }
    KILN_CHECK(false) << "cannot inline " << ir::op_name(n.op);
    return nullptr;
  }

  Idx view_index(const Node& n, const Idx& idx) {
    const Node& in = *n.inputs[0];
    Idx r(in.shape.size());
    switch (n.op) {
      case Op::Expand: {
        size_t off = n.shape.size() - in.shape.size();
        for (size_t i = 0; i < in.shape.size(); ++i)
          r[i] = ir::is_one(in.shape[i]) ? b_.getInt64(0) : idx[i + off];
        return r;
      }
      case Op::Permute:
        for (size_t i = 0; i < n.attrs.perm.size(); ++i) r[n.attrs.perm[i]] = idx[i];
        return r;
      case Op::Slice:
        for (size_t i = 0; i < r.size(); ++i) {
          int64_t start = n.attrs.starts[i], step = n.attrs.steps[i];
          if (ir::is_one(n.shape[i]))
            r[i] = b_.getInt64(start);
          else if (start == 0 && step == 1)
            r[i] = idx[i];
          else
            r[i] = b_.CreateAdd(b_.getInt64(start), b_.CreateMul(idx[i], b_.getInt64(step)));
        }
        return r;
      case Op::Reshape: {
        // Dims of size 1 carry no index: match the non-1 dims when they agree (a pure
        // insert/drop of unit dims), otherwise go through the linear index.
        std::vector<std::pair<size_t, size_t>> pairs;
        if (ir::is_unit_reshape(n.shape, in.shape, &pairs)) {
          for (auto& v : r) v = b_.getInt64(0);
          for (auto [o, i] : pairs) r[i] = idx[o];
          return r;
        }
        Value* lin = linearize(idx, n.shape);
        return delinearize(lin, in.shape);
      }
      default:
        break;
    }
    KILN_CHECK(false) << "not a view: " << ir::op_name(n.op);
    return r;
  }

  Value* emit_concat(const Node& n, const Idx& idx) {
    int64_t axis = n.attrs.axis;
    Value* result = nullptr;
    int64_t offset = 0;
    for (const auto& in : n.inputs) {
      KILN_CHECK(!in->shape[axis].is_symbolic()) << "concat along a symbolic axis";
      int64_t ext = in->shape[axis].value;
      if (ext == 0) continue;
      Idx sub = idx;
      // Clamp so inputs not selected still read in bounds; the select keeps the right one.
      Value* local = b_.CreateSub(idx[axis], b_.getInt64(offset));
      local = b_.CreateSelect(b_.CreateICmpSLT(local, b_.getInt64(0)), b_.getInt64(0), local);
      local = b_.CreateSelect(b_.CreateICmpSGT(local, b_.getInt64(ext - 1)), b_.getInt64(ext - 1),
                              local);
      sub[axis] = local;
      Value* v = emit(in.get(), sub);
      result =
          result ? b_.CreateSelect(b_.CreateICmpSGE(idx[axis], b_.getInt64(offset)), v, result) : v;
      offset += ext;
    }
    return result;
  }

  Value* emit_unary(const Node& n, Value* x) {
    bool fl = is_float_compute(n.dtype);
    DType t = n.dtype;
    switch (n.op) {
      case Op::Neg:
        return fl ? b_.CreateFNeg(x) : b_.CreateNeg(x);
      case Op::Abs:
        if (fl) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        if (t == DType::boolean) return x;
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
      case Op::Exp:
        return emit_exp(b_, x);
      case Op::Log:
        return emit_log(b_, x);
      case Op::Sqrt:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      case Op::Rsqrt:
        return b_.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0),
                             b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
      case Op::Tanh:
        return emit_tanh(b_, x);
      case Op::Sigmoid:
        return emit_sigmoid(b_, x);
      case Op::Erf:
        return emit_erf(b_, x);
      case Op::Relu:
        if (fl)
          return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x,
                                          llvm::ConstantFP::get(x->getType(), 0.0));
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x,
                                        llvm::ConstantInt::get(x->getType(), 0));
      case Op::Square:
        if (t == DType::boolean) return x;
        return fl ? b_.CreateFMul(x, x) : b_.CreateMul(x, x);
      case Op::Not:
        return b_.CreateNot(x);
      default:
        break;
    }
    KILN_CHECK(false) << "unary " << ir::op_name(n.op);
    return nullptr;
  }

  Value* emit_binary(const Node& n, Value* a, Value* c) {
    DType in_t = n.inputs[0]->dtype;
    bool fl = is_float_compute(in_t);
    bool bl = in_t == DType::boolean;
    switch (n.op) {
      case Op::Add:
        return fl ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
      case Op::Sub:
        return fl ? b_.CreateFSub(a, c) : b_.CreateSub(a, c);
      case Op::Mul:
        return fl ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
      case Op::Div:
        return b_.CreateFDiv(a, c);
      case Op::Pow:
        if (fl) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, c);
        {
          llvm::Type* d = b_.getDoubleTy();
          Value* r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow,
                                              bl ? b_.CreateUIToFP(a, d) : b_.CreateSIToFP(a, d),
                                              bl ? b_.CreateUIToFP(c, d) : b_.CreateSIToFP(c, d));
          return float_to_int_wrapping(r, a->getType());
        }
      case Op::Maximum:
        if (fl) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, c);
        return bl ? b_.CreateOr(a, c) : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, c);
      case Op::Minimum:
        if (fl) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, c);
        return bl ? b_.CreateAnd(a, c) : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, c);
      case Op::Lt:
        return fl ? b_.CreateFCmpOLT(a, c) : bl ? b_.CreateICmpULT(a, c) : b_.CreateICmpSLT(a, c);
      case Op::Le:
        return fl ? b_.CreateFCmpOLE(a, c) : bl ? b_.CreateICmpULE(a, c) : b_.CreateICmpSLE(a, c);
      case Op::Gt:
        return fl ? b_.CreateFCmpOGT(a, c) : bl ? b_.CreateICmpUGT(a, c) : b_.CreateICmpSGT(a, c);
      case Op::Ge:
        return fl ? b_.CreateFCmpOGE(a, c) : bl ? b_.CreateICmpUGE(a, c) : b_.CreateICmpSGE(a, c);
      case Op::Eq:
        return fl ? b_.CreateFCmpOEQ(a, c) : b_.CreateICmpEQ(a, c);
      case Op::Ne:
        return fl ? b_.CreateFCmpUNE(a, c) : b_.CreateICmpNE(a, c);
      case Op::And:
        return b_.CreateAnd(a, c);
      case Op::Or:
        return b_.CreateOr(a, c);
      default:
        break;
    }
    KILN_CHECK(false) << "binary " << ir::op_name(n.op);
    return nullptr;
  }

  Value* emit_cast(Value* v, DType from, DType to) {
    llvm::Type* dst = compute_type(to);
    bool ff = is_float_compute(from), tf = is_float_compute(to);
    if (to == DType::boolean) {
      if (from == DType::boolean) return v;
      return ff ? b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (ff && tf) return round_to(b_.CreateFPCast(v, dst), to);
    if (ff) return float_to_int_wrapping(v, dst);
    if (tf) {
      Value* r = from == DType::boolean ? b_.CreateUIToFP(v, dst) : b_.CreateSIToFP(v, dst);
      return round_to(r, to);
    }
    if (from == DType::boolean) return b_.CreateZExt(v, dst);
    return b_.CreateSExtOrTrunc(v, dst);
  }

  // The contraction's value inside its epilogue: only at the element being stored.
  Value* contraction_value(const Node& n, const Idx& idx) {
    KILN_CHECK(&n == g_.contraction.get() && contraction_value_)
        << "contraction outside its kernel";
    for (size_t i = 0; i < idx.size(); ++i)
      if (!ir::is_one(n.shape[i]) && idx[i] != contraction_idx_[i]) throw FusionRejected(&n);
    return contraction_value_;
  }

  // Stores the root for the current contraction element (value `v` at index `idx`).
  void store_epilogue(Value* v, const Idx& idx, Value* offset) {
    contraction_value_ = v;
    contraction_idx_ = idx;
    memo_.clear();
    store_out(g_.root.get() == g_.contraction.get() ? v : emit(g_.root.get(), idx), offset);
    contraction_value_ = nullptr;
  }

  // Truncates toward zero, then wraps to the integer type (NaN and +-inf give 0): numpy's
  // behaviour on the values it defines, and the interpreter's rule.
  Value* float_to_int_wrapping(Value* v, llvm::Type* dst) {
    Value* finite = b_.CreateFCmpOLT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v),
                                     llvm::ConstantFP::getInfinity(v->getType()));
    Value* wide =
        b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b_.getInt64Ty(), v->getType()}, {v});
    wide = b_.CreateSelect(finite, wide, b_.getInt64(0));
    return b_.CreateTrunc(wide, dst);
  }

  // ---- reductions -------------------------------------------------------------------------
  Value* reduced_value(const Node& n, const Idx& idx) {
    auto it = reduce_value_.find(&n);
    if (it == reduce_value_.end()) throw FusionRejected(&n);
    // Valid only when read at the rows being computed: kept axes must be the row's indices.
    for (size_t i = 0; i < idx.size(); ++i) {
      bool red =
          std::binary_search(g_.reduce_axes.begin(), g_.reduce_axes.end(), static_cast<int64_t>(i));
      if (!red && !ir::is_one(g_.domain[i]) && idx[i] != outer_idx_[i]) throw FusionRejected(&n);
    }
    return it->second;
  }

  Value* reduce_init(const Node& r) {
    DType t = r.dtype;
    bool fl = is_float_compute(t);
    switch (r.op) {
      case Op::ReduceSum:
      case Op::ReduceMean:
        return constant(0, t);
      case Op::ReduceMax:
        if (t == DType::boolean) return b_.getFalse();
        return fl ? llvm::ConstantFP::getInfinity(compute_type(t), true)
                  : llvm::ConstantInt::get(
                        compute_type(t),
                        llvm::APInt::getSignedMinValue(compute_type(t)->getIntegerBitWidth()));
      case Op::ReduceMin:
        if (t == DType::boolean) return b_.getTrue();
        return fl ? llvm::ConstantFP::getInfinity(compute_type(t), false)
                  : llvm::ConstantInt::get(
                        compute_type(t),
                        llvm::APInt::getSignedMaxValue(compute_type(t)->getIntegerBitWidth()));
      default:
        break;
    }
    KILN_CHECK(false);
    return nullptr;
  }

  Value* reduce_combine(const Node& r, Value* acc, Value* x) {
    DType t = r.dtype;
    bool fl = is_float_compute(t);
    switch (r.op) {
      case Op::ReduceSum:
      case Op::ReduceMean:
        if (fl) {
          // Reassociation lets the vectorizer keep several partial sums (blocked summation).
          auto* add = llvm::cast<llvm::Instruction>(b_.CreateFAdd(acc, x));
          llvm::FastMathFlags fmf;
          fmf.setAllowReassoc();
          add->setFastMathFlags(fmf);
          return add;
        }
        return b_.CreateAdd(acc, x);
      case Op::ReduceMax:
        if (t == DType::boolean) return b_.CreateOr(acc, x);
        return fl ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, acc, x)
                  : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, acc, x);
      case Op::ReduceMin:
        if (t == DType::boolean) return b_.CreateAnd(acc, x);
        return fl ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, acc, x)
                  : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, acc, x);
      default:
        break;
    }
    KILN_CHECK(false);
    return nullptr;
  }

  // ---- kernels ----------------------------------------------------------------------------
  void emit_elementwise() {
    const ir::Shape& dims = g_.root->shape;
    if (dims.empty()) {
      loop(begin_, end_, {}, [&](Value*, const std::vector<Value*>&) {
        store_out(emit(g_.root.get(), {}), b_.getInt64(0));
        return std::vector<Value*>{};
      });
      return;
    }
    ir::Shape outer_dims(dims.begin(), dims.end() - 1);
    // while (lin < end): one (partial) row at a time, the inner loop over the last dim.
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "rows", fn_);
    auto* body = llvm::BasicBlock::Create(ctx_, "row", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* lin = b_.CreatePHI(b_.getInt64Ty(), 2);
    lin->addIncoming(begin_, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(lin, end_), body, exit);
    b_.SetInsertPoint(body);
    Value* lastv = dimv(dims.back());
    Value* row = b_.CreateUDiv(lin, lastv);
    Value* col0 = b_.CreateURem(lin, lastv);
    Value* room = b_.CreateSub(lastv, col0);
    Value* left = b_.CreateSub(end_, lin);
    Value* ncol = b_.CreateSelect(b_.CreateICmpSLT(room, left), room, left);
    Idx outer = outer_dims.empty() ? Idx{} : delinearize(row, outer_dims);
    Value* base = b_.CreateMul(row, lastv);
    loop(col0, b_.CreateAdd(col0, ncol), {}, [&](Value* col, const std::vector<Value*>&) {
      Idx idx = outer;
      idx.push_back(col);
      store_out(emit(g_.root.get(), idx), b_.CreateAdd(base, col));
      return std::vector<Value*>{};
    });
    Value* next = b_.CreateAdd(lin, ncol);
    lin->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  void emit_row_reduce() {
    const ir::Shape& dims = g_.domain;
    const auto& axes = g_.reduce_axes;
    ir::Shape kept_dims;
    std::vector<int64_t> kept_axes;
    for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
      if (!std::binary_search(axes.begin(), axes.end(), i)) {
        kept_dims.push_back(dims[i]);
        kept_axes.push_back(i);
      }
    loop(begin_, end_, {}, [&](Value* o, const std::vector<Value*>&) {
      Idx kept = delinearize(o, kept_dims);
      outer_idx_.assign(dims.size(), nullptr);
      for (size_t k = 0; k < kept_axes.size(); ++k) outer_idx_[kept_axes[k]] = kept[k];
      reduce_value_.clear();
      for (const auto& n : g_.nodes) {
        if (!ir::is_reduce(n->op) || leaf_index_.count(n.get())) continue;
        Idx idx = outer_idx_;
        const Node* input = n->inputs[0].get();
        std::vector<Value*> acc =
            loop_nest(axes, dims, idx, {reduce_init(*n)}, [&](const std::vector<Value*>& cur) {
              return std::vector<Value*>{reduce_combine(*n, cur[0], emit(input, idx))};
            });
        Value* v = acc[0];
        if (n->op == Op::ReduceMean) {
          int64_t count = 1;
          Value* runtime = nullptr;  // the product of the symbolic extents
          for (int64_t a : axes) {
            if (dims[a].is_symbolic())
              runtime = runtime ? mul_nsw(runtime, dimv(dims[a])) : dimv(dims[a]);
            else
              count *= dims[a].value;
          }
          Value* c = llvm::ConstantFP::get(v->getType(), static_cast<double>(count));
          if (runtime) c = b_.CreateFMul(c, b_.CreateUIToFP(runtime, v->getType()));
          v = b_.CreateFDiv(v, c);
        }
        reduce_value_[n.get()] = v;
      }
      if (g_.root_is_outer) {
        // The root has the kept dims (with or without unit dims where the axes were).
        Idx ridx;
        bool keepdims = g_.root->shape.size() == dims.size();
        for (size_t i = 0; i < dims.size(); ++i) {
          bool red = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i));
          if (!red)
            ridx.push_back(outer_idx_[i]);
          else if (keepdims)
            ridx.push_back(b_.getInt64(0));
        }
        memo_.clear();
        store_out(emit(g_.root.get(), ridx), o);
      } else {
        Idx idx = outer_idx_;
        loop_nest(axes, dims, idx, {}, [&](const std::vector<Value*>&) {
          store_out(emit(g_.root.get(), idx), linearize(idx, dims));
          return std::vector<Value*>{};
        });
      }
      return std::vector<Value*>{};
    });
  }

  void emit_matmul() {
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
    llvm::Type* st = storage_type(t);
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
          b_.CreateStore(from_compute(constant(0, t), t),
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
            Value* v = to_compute(b_.CreateLoad(st, b_.CreateInBoundsGEP(st, out_ptr_, off)), t);
            store_epilogue(v, at(bi, i, j), off);
            return std::vector<Value*>{};
          });
        }
      } else {
        loop(b_.getInt64(0), n, {}, [&](Value* j, const std::vector<Value*>&) {
          std::vector<Value*> acc = loop(b_.getInt64(0), k, {constant(0, t)},
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

  Value* fma(Value* a, Value* c, Value* acc) {
    auto* mul = llvm::cast<llvm::Instruction>(b_.CreateFMul(a, c));
    auto* add = llvm::cast<llvm::Instruction>(b_.CreateFAdd(acc, mul));
    llvm::FastMathFlags fmf;
    fmf.setAllowContract();
    mul->setFastMathFlags(fmf);
    add->setFastMathFlags(fmf);
    return add;
  }

  // max(0, ceil(num / den)) and min(limit, floor(num / den) + 1) for den > 0, num signed.
  Value* ceil_div_clamped(Value* num, int64_t den) {
    Value* pos = b_.CreateSDiv(b_.CreateAdd(num, b_.getInt64(den - 1)), b_.getInt64(den));
    return b_.CreateSelect(b_.CreateICmpSLE(num, b_.getInt64(0)), b_.getInt64(0), pos);
  }
  Value* floor_div_plus1_clamped(Value* num, int64_t den, int64_t limit) {
    Value* v = b_.CreateAdd(b_.CreateSDiv(num, b_.getInt64(den)), b_.getInt64(1));
    v = b_.CreateSelect(b_.CreateICmpSLT(num, b_.getInt64(0)), b_.getInt64(0), v);
    return b_.CreateSelect(b_.CreateICmpSGT(v, b_.getInt64(limit)), b_.getInt64(limit), v);
  }

  void emit_conv2d() {
    const Node& cv = *g_.contraction;
    auto out = ir::concrete_dims(cv.shape);
    auto xs = ir::concrete_dims(cv.inputs[0]->shape);
    auto ws = ir::concrete_dims(cv.inputs[1]->shape);
    const Conv2dParams& p = cv.attrs.conv;
    int64_t groups = p.groups, cg = ws[1], og = ws[0] / groups;
    const Node* x = cv.inputs[0].get();
    const Node* w = cv.inputs[1].get();
    DType t = cv.dtype;
    llvm::Type* st = storage_type(t);
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
               b_.CreateStore(from_compute(constant(0, t), t),
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
                          Value* iw =
                              b_.CreateAdd(b_.CreateMul(ow, b_.getInt64(p.stride[1])), woff);
                          Value* xv = emit(x, {nimg, b_.CreateAdd(cbase, c), ih, iw});
                          Value* ptr = b_.CreateInBoundsGEP(st, out_ptr_, b_.CreateAdd(row, ow));
                          Value* cur = to_compute(b_.CreateLoad(st, ptr), t);
                          Value* r = is_floating(t) ? fma(xv, wv, cur)
                                                    : b_.CreateAdd(cur, b_.CreateMul(xv, wv));
                          b_.CreateStore(from_compute(r, t), ptr);
                          return std::vector<Value*>{};
                        });
                      });
                    });
              });
        });
        if (g_.root.get() != g_.contraction.get()) {
          loop(b_.getInt64(0), b_.getInt64(out[2]), {}, [&](Value* oh, const std::vector<Value*>&) {
            return loop(b_.getInt64(0), b_.getInt64(out[3]), {},
                        [&](Value* ow, const std::vector<Value*>&) {
                          Value* off = b_.CreateAdd(
                              plane, b_.CreateAdd(b_.CreateMul(oh, b_.getInt64(out[3])), ow));
                          Value* v = to_compute(
                              b_.CreateLoad(st, b_.CreateInBoundsGEP(st, out_ptr_, off)), t);
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
              b_.getInt64(0), b_.getInt64(cg), {constant(0, t)},
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
                            xv = b_.CreateSelect(inb, xv, constant(0, t));
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

  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const ir::FusionGroup& g_;
  const std::vector<LeafLayout>& layouts_;
  DType out_storage_;
  const ir::SymbolFacts& facts_;
  std::unordered_map<int32_t, Value*> sym_;  // symbol id -> its extent (loaded at entry)
  std::unique_ptr<llvm::Module> mod_;
  llvm::Function* fn_ = nullptr;
  Value* begin_ = nullptr;
  Value* end_ = nullptr;
  Value* out_ptr_ = nullptr;
  std::vector<Value*> leaf_ptr_;
  std::vector<std::vector<Value*>> leaf_strides_;
  std::unordered_map<const Node*, int> leaf_index_;
  std::unordered_set<const Node*> in_group_;
  Idx outer_idx_;
  Value* contraction_value_ = nullptr;
  Idx contraction_idx_;
  std::unordered_map<const Node*, Value*> reduce_value_;
  std::map<std::pair<const Node*, Idx>, Value*> memo_;
};

}  // namespace

std::unique_ptr<llvm::Module> lower_group(llvm::LLVMContext& ctx, const ir::FusionGroup& g,
                                          const std::vector<LeafLayout>& layouts, DType out_storage,
                                          const ir::SymbolFacts& facts) {
  KILN_CHECK(layouts.size() == g.leaves.size());
  Emitter e(ctx, g, layouts, out_storage, facts);
  return e.run();
}

}  // namespace kiln::llvmjit
