#include "codegen/llvm/lower_group.h"

#include "codegen/llvm/emit_scalar.h"
#include "codegen/llvm/lower_group_emitter.h"
#include "codegen/schedule.h"
#include "jit/device.h"
#include "support/check.h"

#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>

namespace kiln::llvmjit {

Emitter::Emitter(llvm::LLVMContext& ctx, const ir::FusionGroup& g,
                 const std::vector<LeafLayout>& layouts, DType out_storage,
                 const ir::SymbolFacts& facts)
    : ctx_(ctx), b_(ctx), g_(g), layouts_(layouts), out_storage_(out_storage), facts_(facts) {
  mod_ = std::make_unique<llvm::Module>("kiln", ctx);
  // Let a*b+c contract to FMA (more accurate, and half the work of polynomial steps).
  llvm::FastMathFlags fmf;
  fmf.setAllowContract();
  b_.setFastMathFlags(fmf);
}

std::unique_ptr<llvm::Module> Emitter::run() {
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

void Emitter::load_symbols(Value* dims) {
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

Value* Emitter::dimv(const ir::Dim& d) {
  if (!d.is_symbolic()) return b_.getInt64(d.value);
  auto it = sym_.find(d.sym);
  KILN_CHECK(it != sym_.end()) << "symbol s" << d.sym << " not loaded";
  return it->second;
}

std::vector<Value*> Emitter::dimvs(const ir::Shape& s) {
  std::vector<Value*> v;
  for (const ir::Dim& d : s) v.push_back(dimv(d));
  return v;
}

std::vector<Value*> Emitter::row_major(const ir::Shape& s) {
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

Value* Emitter::load_ptr(Value* bufs, size_t j) {
  Value* p = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), bufs, j);
  return b_.CreateLoad(b_.getPtrTy(), p);
}

std::vector<Value*> Emitter::loop(
    Value* lo, Value* hi, std::vector<Value*> carried,
    const std::function<std::vector<Value*>(Value*, const std::vector<Value*>&)>& body,
    bool unroll) {
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
  llvm::BranchInst* back = b_.CreateBr(header);
  if (!unroll) {
    llvm::Metadata* no_unroll =
        llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, "llvm.loop.unroll.disable"));
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, {nullptr, no_unroll});
    id->replaceOperandWith(0, id);
    back->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
  iv->addIncoming(iv_next, latch);
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  b_.SetInsertPoint(exit);
  memo_.clear();
  return std::vector<Value*>(phis.begin(), phis.end());
}

std::vector<Value*> Emitter::loop_nest(
    const std::vector<int64_t>& axes, const ir::Shape& dims, Idx& idx, std::vector<Value*> carried,
    const std::function<std::vector<Value*>(const std::vector<Value*>&)>& body, size_t level) {
  if (level == axes.size()) return body(carried);
  int64_t ax = axes[level];
  return loop(b_.getInt64(0), dimv(dims[ax]), carried,
              [&](Value* iv, const std::vector<Value*>& cur) {
                idx[ax] = iv;
                return loop_nest(axes, dims, idx, cur, body, level + 1);
              });
}

Idx Emitter::delinearize(Value* lin, const ir::Shape& dims) {
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

Value* Emitter::linearize(const Idx& idx, const ir::Shape& dims) {
  Value* lin = b_.getInt64(0);
  auto st = row_major(dims);
  for (size_t i = 0; i < idx.size(); ++i)
    if (!ir::is_one(dims[i])) lin = b_.CreateAdd(lin, mul_nsw(idx[i], st[i]), "", true, true);
  return lin;
}

Value* Emitter::load_leaf(int j, const Idx& idx) {
  const Node& leaf = *g_.leaves[j];
  Value* off = b_.getInt64(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    if (ir::is_one(leaf.shape[d])) continue;  // the only valid index is 0
    off = b_.CreateAdd(off, b_.CreateMul(idx[d], leaf_strides_[j][d]));
  }
  DType sd = layouts_[j].storage;
  llvm::Type* st = storage_type(b_, sd);
  Value* p = b_.CreateGEP(st, leaf_ptr_[j], off);
  return to_compute(b_, b_.CreateLoad(st, p), sd);
}

void Emitter::store_out(Value* v, Value* offset) {
  DType t = out_storage_;
  llvm::Type* st = storage_type(b_, t);
  b_.CreateStore(from_compute(b_, v, t), b_.CreateInBoundsGEP(st, out_ptr_, offset));
}

Value* Emitter::emit(const Node* n, const Idx& idx) {
  if (auto it = leaf_index_.find(n); it != leaf_index_.end()) return load_leaf(it->second, idx);
  if (row_cache_live_)
    if (Value* v = cached_row_value(*n, idx)) return v;
  if (column_cache_live_)
    if (Value* v = cached_column_value(*n, idx)) return v;
  auto key = std::make_pair(n, idx);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  Value* v = emit_uncached(*n, idx);
  memo_[key] = v;
  return v;
}

Value* Emitter::emit_uncached(const Node& n, const Idx& idx) {
  KILN_CHECK(in_group_.count(&n)) << "node " << ir::op_name(n.op)
                                  << " is neither computed nor a leaf";
  switch (ir::op_kind(n.op)) {
    case ir::OpKind::leaf:
      KILN_CHECK(n.op == Op::Constant && n.shape.empty());
      if (!is_floating(n.dtype) && n.dtype != DType::boolean)  // exact past 2^53
        return llvm::ConstantInt::get(compute_type(b_, n.dtype),
                                      static_cast<uint64_t>(n.constant_int_at(0)), true);
      return compute_constant(b_, n.constant_at(0), n.dtype);
    case ir::OpKind::unary:
      return emit_unary(b_, n.op, n.dtype, emit(n.inputs[0].get(), idx));
    case ir::OpKind::binary:
      return emit_binary(b_, n.op, n.inputs[0]->dtype, emit(n.inputs[0].get(), idx),
                         emit(n.inputs[1].get(), idx));
    case ir::OpKind::ternary:
      return b_.CreateSelect(emit(n.inputs[0].get(), idx), emit(n.inputs[1].get(), idx),
                             emit(n.inputs[2].get(), idx));
    case ir::OpKind::cast:
      return emit_cast(b_, emit(n.inputs[0].get(), idx), n.inputs[0]->dtype, n.dtype);
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

Idx Emitter::view_index(const Node& n, const Idx& idx) {
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

Value* Emitter::emit_concat(const Node& n, const Idx& idx) {
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
    local =
        b_.CreateSelect(b_.CreateICmpSGT(local, b_.getInt64(ext - 1)), b_.getInt64(ext - 1), local);
    sub[axis] = local;
    Value* v = emit(in.get(), sub);
    result =
        result ? b_.CreateSelect(b_.CreateICmpSGE(idx[axis], b_.getInt64(offset)), v, result) : v;
    offset += ext;
  }
  return result;
}

Value* Emitter::contraction_value(const Node& n, const Idx& idx) {
  KILN_CHECK(&n == g_.contraction.get() && contraction_value_) << "contraction outside its kernel";
  for (size_t i = 0; i < idx.size(); ++i)
    if (!ir::is_one(n.shape[i]) && idx[i] != contraction_idx_[i]) throw FusionRejected(&n);
  return contraction_value_;
}

void Emitter::store_epilogue(Value* v, const Idx& idx, Value* offset) {
  contraction_value_ = v;
  contraction_idx_ = idx;
  memo_.clear();
  store_out(g_.root.get() == g_.contraction.get() ? v : emit(g_.root.get(), idx), offset);
  contraction_value_ = nullptr;
}

void Emitter::emit_elementwise() {
  const ir::Shape& dims = g_.root->shape;
  if (dims.empty()) {
    loop(begin_, end_, {}, [&](Value*, const std::vector<Value*>&) {
      store_out(emit(g_.root.get(), {}), b_.getInt64(0));
      return std::vector<Value*>{};
    });
    return;
  }
  ir::Shape outer_dims(dims.begin(), dims.end() - 1);
  Value* lastv = dimv(dims.back());
  row_pieces(lastv, 0, [&](Value*, Value* row, Value* col0, Value* ncol) {
    Idx outer = outer_dims.empty() ? Idx{} : delinearize(row, outer_dims);
    Value* base = b_.CreateMul(row, lastv);
    loop(col0, b_.CreateAdd(col0, ncol), {}, [&](Value* col, const std::vector<Value*>&) {
      Idx idx = outer;
      idx.push_back(col);
      store_out(emit(g_.root.get(), idx), b_.CreateAdd(base, col));
      return std::vector<Value*>{};
    });
  });
}

void Emitter::row_pieces(Value* width, int64_t cap,
                         const std::function<void(Value*, Value*, Value*, Value*)>& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "pieces", fn_);
  auto* piece = llvm::BasicBlock::Create(ctx_, "piece", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "pieces_done", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* lin = b_.CreatePHI(b_.getInt64Ty(), 2);
  lin->addIncoming(begin_, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(lin, end_), piece, exit);
  b_.SetInsertPoint(piece);
  Value* row = b_.CreateUDiv(lin, width);
  Value* col0 = b_.CreateURem(lin, width);
  auto min = [&](Value* a, Value* c) { return b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c); };
  Value* n = min(b_.CreateSub(width, col0), b_.CreateSub(end_, lin));
  if (cap > 0) n = min(n, b_.getInt64(cap));
  body(lin, row, col0, n);
  lin->addIncoming(b_.CreateAdd(lin, n, "", true, true), b_.GetInsertBlock());
  b_.CreateBr(header);
  b_.SetInsertPoint(exit);
}

std::unique_ptr<llvm::Module> lower_group(llvm::LLVMContext& ctx, const ir::FusionGroup& g,
                                          const std::vector<LeafLayout>& layouts, DType out_storage,
                                          const ir::SymbolFacts& facts) {
  KILN_CHECK(layouts.size() == g.leaves.size());
  Emitter e(ctx, g, layouts, out_storage, facts);
  return e.run();
}

}  // namespace kiln::llvmjit
