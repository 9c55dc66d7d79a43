// The emitter's row_reduce kernels (lower_group_emitter.h). Two loop orders:
// - rows: one output element at a time, its reduction innermost (the reduced axes include the
//   last one, or the kept last axis is too short to walk);
// - columns: a tile of up to kColumnTile outputs that follow each other along the kept last axis,
//   that axis innermost, so each step of the reduction reads a contiguous piece of a row
//   (x.sum(axis=0) of a row-major matrix walks its rows, not its columns one stride at a time).
// Float sums and means are accumulated in double (see accumulator_type): both kernels add a float32
// partial sum per block of the innermost reduced axis (kSumBlock elements in the rows kernel,
// vectorized with several partial sums; kColumnSumBlock steps in the columns kernel).
#include "codegen/llvm/emit_scalar.h"
#include "codegen/llvm/lower_group_emitter.h"
#include "codegen/schedule.h"

#include <algorithm>

namespace kiln::llvmjit {

namespace {
// Elements of the innermost reduced axis summed in float32 before they join the double total.
constexpr int64_t kSumBlock = 512;
// Outputs one columns-kernel step computes together (at most; fewer where the group has so many
// reductions that their tiles would pass kColumnStackBytes), and the shortest kept last axis
// walked so.
constexpr int64_t kColumnTile = 4096;
constexpr int64_t kColumnStackBytes = 128 * 1024;
// Steps of the innermost reduced axis a columns kernel sums in float32 before they join the
// double accumulators.
constexpr int64_t kColumnSumBlock = 16;
// Rows of the innermost reduced axis a columns-kernel step reads (and combines) together.
constexpr int64_t kColumnRows = 4;
constexpr int64_t kMinColumns = 8;
// The longest row whose reductions' inputs the rows kernel keeps (plan_row_cache), and the stack
// all of them may take.
constexpr int64_t kRowCache = 8192;
constexpr int64_t kRowCacheBytes = 64 * 1024;
// The stack the columns kernel's copies of such inputs may take (plan_column_cache): a tile's
// columns over the whole reduced axis, so at most 256 float32 rows. Narrower tiles (longer axes)
// lost more in the reductions' passes than the values kept saved: softmax over axis 0 on one
// thread, (400, 3000) with tiles of 80 columns 2.0 -> 2.8 ms, (2048, 1000) with 16 columns 4.6 ->
// 7 ms; with 128 columns or more it gained ((100, 3000) 0.5 -> 0.35 ms, (256, 1024) 0.45 -> 0.33).
constexpr int64_t kColumnCacheBytes = 128 * 1024;
constexpr int64_t kMinCachedColumns = 128;

bool is_reduced(const std::vector<int64_t>& axes, size_t i) {
  return std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i));
}
}  // namespace

Value* Emitter::reduced_value(const Node& n, const Idx& idx) {
  auto it = reduce_value_.find(&n);
  if (it == reduce_value_.end()) throw FusionRejected(&n);
  // Valid only when read at the rows being computed: kept axes must be the row's indices.
  for (size_t i = 0; i < idx.size(); ++i) {
    if (!is_reduced(g_.reduce_axes, i) && !ir::is_one(g_.domain[i]) && idx[i] != outer_idx_[i])
      throw FusionRejected(&n);
  }
  return it->second;
}

Value* Emitter::finish_reduce(const Node& n, Value* acc) {
  if (n.op == Op::ReduceMean) {
    int64_t count = 1;
    Value* runtime = nullptr;  // the product of the symbolic extents
    for (int64_t a : g_.reduce_axes) {
      const ir::Dim& d = g_.domain[a];
      if (d.is_symbolic())
        runtime = runtime ? mul_nsw(runtime, dimv(d)) : dimv(d);
      else
        count *= d.value;
    }
    Value* c = llvm::ConstantFP::get(acc->getType(), static_cast<double>(count));
    if (runtime) c = b_.CreateFMul(c, b_.CreateUIToFP(runtime, acc->getType()));
    acc = b_.CreateFDiv(acc, c);
  }
  llvm::Type* ct = compute_type(b_, n.dtype);
  return acc->getType() == ct ? acc : b_.CreateFPTrunc(acc, ct);
}

std::vector<Value*> Emitter::block_loop(
    Value* extent, int64_t block, std::vector<Value*> carried,
    const std::function<std::vector<Value*>(Value*, Value*, const std::vector<Value*>&)>& body,
    bool unroll) {
  Value* blocks = b_.CreateUDiv(b_.CreateAdd(extent, b_.getInt64(block - 1)), b_.getInt64(block));
  return loop(
      b_.getInt64(0), blocks, std::move(carried),
      [&](Value* blk, const std::vector<Value*>& cur) {
        Value* lo = mul_nsw(blk, b_.getInt64(block));
        Value* hi = b_.CreateAdd(lo, b_.getInt64(block));
        hi = b_.CreateSelect(b_.CreateICmpSLT(hi, extent), hi, extent);
        return body(lo, hi, cur);
      },
      unroll);
}

Value* Emitter::accumulate_row(const Node& n, Idx idx) {
  const auto& axes = g_.reduce_axes;
  const ir::Shape& dims = g_.domain;
  const Node* input = n.inputs[0].get();
  Value* init = accumulator_init(b_, n.op, n.dtype);
  if (axes.empty()) return accumulate(b_, n.op, n.dtype, init, emit(input, idx));
  const int64_t inner = axes.back();
  const std::vector<int64_t> outer(axes.begin(), axes.end() - 1);
  // A row of several blocks is walked block after block: fully unrolled (a 4096-float row was),
  // LLVM interleaved the blocks' partial sums and read them out of address order, and one core
  // streamed at 11-12 GB/s (x.sum(axis=1) of (4096, 4096) on one thread, fastest calls: 5.5-6.0
  // -> 3.7-4.4 ms). A row of one block keeps its unrolled form.
  const bool unroll_blocks = !dims[inner].is_symbolic() && dims[inner].value <= kSumBlock;
  auto acc = loop_nest(outer, dims, idx, {init}, [&](const std::vector<Value*>& total) {
    return block_loop(
        dimv(dims[inner]), kSumBlock, total,
        [&](Value* lo, Value* hi, const std::vector<Value*>& cur) {
          auto part = loop(lo, hi, {reduce_init(b_, n.op, n.dtype)},
                           [&](Value* iv, const std::vector<Value*>& p) {
                             idx[inner] = iv;
                             Value* x = emit(input, idx);
                             if (auto c = row_cache_.find(input); c != row_cache_.end())
                               b_.CreateStore(x, b_.CreateInBoundsGEP(x->getType(), c->second, iv));
                             else if (input == row_cache_in_output_)
                               b_.CreateStore(x, output_slot(idx));
                             return std::vector<Value*>{reduce_combine(b_, n.op, n.dtype, p[0], x)};
                           });
          return std::vector<Value*>{accumulate(b_, n.op, n.dtype, cur[0], part[0])};
        },
        unroll_blocks);
  });
  return finish_reduce(n, acc[0]);
}

void Emitter::emit_row_reduce() {
  const ir::Shape& dims = g_.domain;
  if (dims.empty() || is_reduced(g_.reduce_axes, dims.size() - 1)) return emit_reduce_rows();
  const ir::Dim& last = dims.back();
  if (!last.is_symbolic()) {
    return last.value >= kMinColumns ? emit_reduce_columns() : emit_reduce_rows();
  }
  auto* cols = llvm::BasicBlock::Create(ctx_, "columns", fn_);
  auto* rows = llvm::BasicBlock::Create(ctx_, "rows", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "reduced", fn_);
  b_.CreateCondBr(b_.CreateICmpSGE(dimv(last), b_.getInt64(kMinColumns)), cols, rows);
  b_.SetInsertPoint(cols);
  emit_reduce_columns();
  b_.CreateBr(done);
  b_.SetInsertPoint(rows);
  emit_reduce_rows();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

std::vector<const Node*> Emitter::reduced_inputs_read_again() {
  // What the root computes at its own elements: the nodes it reaches without a reduction.
  std::unordered_set<const Node*> reached;
  std::vector<const Node*> todo = {g_.root.get()};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (!reached.insert(n).second || leaf_index_.count(n) || ir::is_reduce(n->op)) continue;
    for (const auto& in : n->inputs) todo.push_back(in.get());
  }
  std::vector<const Node*> found;
  for (const auto& n : g_.nodes) {
    if (!ir::is_reduce(n->op) || leaf_index_.count(n.get())) continue;
    const Node* in = n->inputs[0].get();
    // Only values worth keeping: not a load, and read again by the root.
    if (leaf_index_.count(in) || ir::op_kind(in->op) == ir::OpKind::view || !reached.count(in) ||
        std::find(found.begin(), found.end(), in) != found.end())
      continue;
    found.push_back(in);
  }
  return found;
}

void Emitter::plan_row_cache() {
  const ir::Shape& dims = g_.domain;
  if (g_.root_is_outer || dims.empty() || g_.reduce_axes.size() != 1 ||
      g_.reduce_axes[0] != static_cast<int64_t>(dims.size()) - 1)
    return;
  std::vector<const Node*> candidates;  // none on the stack for a long or symbolic row
  if (!dims.back().is_symbolic() && dims.back().value <= kRowCache)
    candidates = reduced_inputs_read_again();
  int64_t bytes = 0;
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  for (const Node* in : candidates) {
    llvm::Type* t = compute_type(b_, in->dtype);
    const int64_t row_bytes = dims.back().value * (t->getPrimitiveSizeInBits() / 8);
    if (bytes + row_bytes > kRowCacheBytes) break;
    bytes += row_bytes;
    row_cache_[in] = eb.CreateAlloca(t, eb.getInt64(dims.back().value));
  }
  if (row_cache_.empty()) row_cache_in_output_ = kept_in_output();
}

const Node* Emitter::kept_in_output() {
  for (const Node* in : reduced_inputs_read_again())
    if (compute_type(b_, in->dtype) == storage_type(b_, out_storage_)) return in;
  return nullptr;
}

Value* Emitter::output_slot(const Idx& idx) {
  return b_.CreateInBoundsGEP(storage_type(b_, out_storage_), out_ptr_, linearize(idx, g_.domain));
}

Value* Emitter::kept_output_value(const Idx& idx) {
  // Only at the element the root is about to overwrite: the others may hold the root already.
  if (idx != root_idx_) return nullptr;
  return b_.CreateLoad(storage_type(b_, out_storage_), output_slot(idx));
}

int64_t Emitter::plan_column_cache(int64_t tile) {
  const ir::Shape& dims = g_.domain;
  if (g_.root_is_outer || g_.reduce_axes.size() != 1) return tile;
  const ir::Dim& reduced = dims[g_.reduce_axes[0]];
  if (!reduced.is_symbolic() && reduced.value == 0) return tile;
  // The inputs kept, as many as leave a tile kMinCachedColumns columns (or all of `tile`).
  const int64_t columns = std::min(tile, kMinCachedColumns);
  std::vector<std::pair<const Node*, llvm::Type*>> kept;
  int64_t column_bytes = 0;
  std::vector<const Node*> candidates;  // none on the stack for a symbolic axis
  if (!reduced.is_symbolic()) candidates = reduced_inputs_read_again();
  for (const Node* in : candidates) {
    llvm::Type* t = compute_type(b_, in->dtype);
    const int64_t bytes = reduced.value * (t->getPrimitiveSizeInBits() / 8);
    if ((column_bytes + bytes) * columns > kColumnCacheBytes) break;
    column_bytes += bytes;
    kept.emplace_back(in, t);
  }
  if (kept.empty()) {  // the axis is too long for the stack, or symbolic
    column_cache_in_output_ = kept_in_output();
    return tile;
  }
  // Whole vectors of columns (a ragged tile's last vector is masked off at every step).
  tile = std::min(tile, kColumnCacheBytes / column_bytes / 16 * 16);
  column_cache_tile_ = tile;
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  for (const auto& [in, t] : kept)
    column_cache_[in] = eb.CreateAlloca(t, eb.getInt64(reduced.value * tile));
  return tile;
}

Value* Emitter::column_cache_slot(const Node& n, const Idx& idx) {
  if (&n == column_cache_in_output_) return output_slot(idx);
  llvm::AllocaInst* a = column_cache_.at(&n);
  Value* row = idx[static_cast<size_t>(g_.reduce_axes[0])];
  Value* at =
      b_.CreateAdd(mul_nsw(row, b_.getInt64(column_cache_tile_)), column_j_, "", true, true);
  return b_.CreateInBoundsGEP(a->getAllocatedType(), a, at);
}

Value* Emitter::cached_column_value(const Node& n, const Idx& idx) {
  if (&n == column_cache_in_output_) return kept_output_value(idx);
  if (!column_cache_.count(&n)) return nullptr;
  // Kept for the tile's column being computed, at every index of the reduced axis.
  const size_t inner = static_cast<size_t>(g_.reduce_axes[0]);
  for (size_t i = 0; i < idx.size(); ++i)
    if (i != inner && !ir::is_one(g_.domain[i]) && idx[i] != outer_idx_[i]) return nullptr;
  llvm::AllocaInst* a = column_cache_.at(&n);
  return b_.CreateLoad(a->getAllocatedType(), column_cache_slot(n, idx));
}

Value* Emitter::cached_row_value(const Node& n, const Idx& idx) {
  if (&n == row_cache_in_output_) return kept_output_value(idx);
  auto it = row_cache_.find(&n);
  if (it == row_cache_.end()) return nullptr;
  // Kept only for the row being computed.
  for (size_t i = 0; i + 1 < idx.size(); ++i)
    if (!ir::is_one(g_.domain[i]) && idx[i] != outer_idx_[i]) return nullptr;
  llvm::AllocaInst* a = it->second;
  return b_.CreateLoad(a->getAllocatedType(),
                       b_.CreateInBoundsGEP(a->getAllocatedType(), a, idx.back()));
}

void Emitter::emit_reduce_rows() {
  const ir::Shape& dims = g_.domain;
  const auto& axes = g_.reduce_axes;
  plan_row_cache();
  ir::Shape kept_dims;
  std::vector<int64_t> kept_axes;
  for (size_t i = 0; i < dims.size(); ++i)
    if (!is_reduced(axes, i)) {
      kept_dims.push_back(dims[i]);
      kept_axes.push_back(static_cast<int64_t>(i));
    }
  loop(begin_, end_, {}, [&](Value* o, const std::vector<Value*>&) {
    Idx kept = delinearize(o, kept_dims);
    outer_idx_.assign(dims.size(), nullptr);
    for (size_t k = 0; k < kept_axes.size(); ++k) outer_idx_[kept_axes[k]] = kept[k];
    reduce_value_.clear();
    for (const auto& n : g_.nodes) {
      if (!ir::is_reduce(n->op) || leaf_index_.count(n.get())) continue;
      reduce_value_[n.get()] = accumulate_row(*n, outer_idx_);
    }
    if (g_.root_is_outer) {
      // The root has the kept dims (with or without unit dims where the axes were).
      Idx ridx;
      bool keepdims = g_.root->shape.size() == dims.size();
      for (size_t i = 0; i < dims.size(); ++i) {
        if (!is_reduced(axes, i))
          ridx.push_back(outer_idx_[i]);
        else if (keepdims)
          ridx.push_back(b_.getInt64(0));
      }
      memo_.clear();
      store_out(emit(g_.root.get(), ridx), o);
    } else {
      Idx idx = outer_idx_;
      row_cache_live_ = !row_cache_.empty() || row_cache_in_output_;
      loop_nest(axes, dims, idx, {}, [&](const std::vector<Value*>&) {
        root_idx_ = idx;
        store_out(emit(g_.root.get(), idx), linearize(idx, dims));
        return std::vector<Value*>{};
      });
      row_cache_live_ = false;
    }
    return std::vector<Value*>{};
  });
}

void Emitter::emit_reduce_columns() {
  const ir::Shape& dims = g_.domain;
  const auto& axes = g_.reduce_axes;
  const size_t last = dims.size() - 1;
  ir::Shape prefix_dims;  // the kept dims before the last
  std::vector<int64_t> prefix_axes;
  for (size_t i = 0; i < last; ++i)
    if (!is_reduced(axes, i)) {
      prefix_dims.push_back(dims[i]);
      prefix_axes.push_back(static_cast<int64_t>(i));
    }
  // Each reduction's accumulators and finished values for the tile, on the stack.
  std::vector<const Node*> reds;
  for (const auto& n : g_.nodes)
    if (ir::is_reduce(n->op) && !leaf_index_.count(n.get())) reds.push_back(n.get());
  // Per reduction and column, at most 24 bytes: a double accumulator, a partial, a finished value.
  const int64_t column_bytes = 24 * std::max<int64_t>(1, static_cast<int64_t>(reds.size()));
  const int64_t tile = plan_column_cache(
      std::clamp<int64_t>(kColumnStackBytes / column_bytes, kMinColumns, kColumnTile));
  std::vector<llvm::AllocaInst*> accs, parts, fins;
  {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    auto stack_tile = [&](llvm::Type* t) { return eb.CreateAlloca(t, eb.getInt64(tile)); };
    for (const Node* n : reds) {
      accs.push_back(stack_tile(accumulator_type(b_, n->op, n->dtype)));
      parts.push_back(stack_tile(compute_type(b_, n->dtype)));
      fins.push_back(stack_tile(compute_type(b_, n->dtype)));
    }
  }
  auto slot = [&](llvm::AllocaInst* a, Value* j) {
    return b_.CreateInBoundsGEP(a->getAllocatedType(), a, j);
  };
  auto load_slot = [&](llvm::AllocaInst* a, Value* j) {
    return b_.CreateLoad(a->getAllocatedType(), slot(a, j));
  };
  // Inside a tile loop at tile position j (column c0 + j): the last axis's index and the
  // finished reductions before `upto` are those of column c0 + j.
  Value* c0 = nullptr;
  auto enter_column = [&](Value* j, Idx& idx, size_t upto) {
    Value* col = b_.CreateAdd(c0, j, "", true, true);
    column_j_ = j;
    idx[last] = col;
    outer_idx_[last] = col;
    reduce_value_.clear();
    for (size_t r = 0; r < upto; ++r) reduce_value_[reds[r]] = load_slot(fins[r], j);
  };
  // One tile of consecutive outputs along the last axis at a time: o the first, len of them.
  row_pieces(dimv(dims[last]), tile, [&](Value* o, Value* row, Value* first, Value* len) {
    c0 = first;
    outer_idx_.assign(dims.size(), nullptr);
    if (!prefix_dims.empty()) {
      Idx kept = delinearize(row, prefix_dims);
      for (size_t k = 0; k < prefix_axes.size(); ++k) outer_idx_[prefix_axes[k]] = kept[k];
    }
    const Idx tile_idx = outer_idx_;
    Value* zero = b_.getInt64(0);
    for (size_t r = 0; r < reds.size(); ++r) {
      const Node& n = *reds[r];
      Idx idx = tile_idx;
      const Node* input = n.inputs[0].get();
      const int64_t inner = axes.empty() ? -1 : axes.back();
      // One step of the reduction for the tile: into[j] (op)= the input at column c0 + j and at
      // `rows` of the innermost reduced axis (combined pairwise first; none when nothing is
      // reduced).
      auto step = [&](llvm::AllocaInst* into, bool partial, const std::vector<Value*>& rows) {
        loop(zero, len, {}, [&](Value* j, const std::vector<Value*>&) {
          enter_column(j, idx, r);
          std::vector<Value*> xs;
          if (rows.empty()) xs.push_back(emit(input, idx));
          for (Value* row : rows) {
            idx[inner] = row;
            xs.push_back(emit(input, idx));
            if (column_cache_.count(input) || input == column_cache_in_output_)
              b_.CreateStore(xs.back(), column_cache_slot(*input, idx));
          }
          for (size_t width = xs.size(); width > 1; width = (width + 1) / 2)
            for (size_t i = 0; 2 * i + 1 < width; ++i)
              xs[i] = reduce_combine(b_, n.op, n.dtype, xs[2 * i], xs[2 * i + 1]);
          Value* old = load_slot(into, j);
          b_.CreateStore(partial ? reduce_combine(b_, n.op, n.dtype, old, xs[0])
                                 : accumulate(b_, n.op, n.dtype, old, xs[0]),
                         slot(into, j));
          return std::vector<Value*>{};
        });
      };
      // The steps over [lo, hi) of the innermost reduced axis: kColumnRows rows at a time (their
      // loads are that many streams), then one.
      auto steps = [&](Value* lo, Value* hi, llvm::AllocaInst* into, bool partial) {
        Value* groups = b_.CreateUDiv(b_.CreateSub(hi, lo), b_.getInt64(kColumnRows));
        loop(zero, groups, {}, [&](Value* q, const std::vector<Value*>&) {
          Value* first = b_.CreateAdd(lo, mul_nsw(q, b_.getInt64(kColumnRows)));
          std::vector<Value*> rows;
          for (int64_t u = 0; u < kColumnRows; ++u)
            rows.push_back(b_.CreateAdd(first, b_.getInt64(u)));
          step(into, partial, rows);
          return std::vector<Value*>{};
        });
        Value* rest = b_.CreateAdd(lo, mul_nsw(groups, b_.getInt64(kColumnRows)));
        loop(rest, hi, {}, [&](Value* iv, const std::vector<Value*>&) {
          step(into, partial, {iv});
          return std::vector<Value*>{};
        });
      };
      auto fill = [&](llvm::AllocaInst* a, Value* v) {
        loop(zero, len, {}, [&](Value* j, const std::vector<Value*>&) {
          b_.CreateStore(v, slot(a, j));
          return std::vector<Value*>{};
        });
      };
      fill(accs[r], accumulator_init(b_, n.op, n.dtype));
      const std::vector<int64_t> outer(axes.begin(), axes.end() - (axes.empty() ? 0 : 1));
      const bool blocked = accs[r]->getAllocatedType() != fins[r]->getAllocatedType();
      if (axes.empty()) {
        step(accs[r], false, {});
      } else if (!blocked) {
        loop_nest(outer, dims, idx, {}, [&](const std::vector<Value*>&) {
          steps(zero, dimv(dims[inner]), accs[r], false);
          return std::vector<Value*>{};
        });
      } else {
        // Float sums: kColumnSumBlock steps of the innermost reduced axis in the compute type, then
        // their partial sums join the double accumulators.
        loop_nest(outer, dims, idx, {}, [&](const std::vector<Value*>&) {
          return block_loop(dimv(dims[inner]), kColumnSumBlock, {},
                            [&](Value* lo, Value* hi, const std::vector<Value*>&) {
                              fill(parts[r], reduce_init(b_, n.op, n.dtype));
                              steps(lo, hi, parts[r], true);
                              loop(zero, len, {}, [&](Value* j, const std::vector<Value*>&) {
                                Value* sum = accumulate(b_, n.op, n.dtype, load_slot(accs[r], j),
                                                        load_slot(parts[r], j));
                                b_.CreateStore(sum, slot(accs[r], j));
                                return std::vector<Value*>{};
                              });
                              return std::vector<Value*>{};
                            });
        });
      }
      loop(zero, len, {}, [&](Value* j, const std::vector<Value*>&) {
        b_.CreateStore(finish_reduce(n, load_slot(accs[r], j)), slot(fins[r], j));
        return std::vector<Value*>{};
      });
    }
    if (g_.root_is_outer) {
      const bool keepdims = g_.root->shape.size() == dims.size();
      loop(zero, len, {}, [&](Value* j, const std::vector<Value*>&) {
        Idx idx = tile_idx;
        enter_column(j, idx, reds.size());
        Idx ridx;
        for (size_t i = 0; i < dims.size(); ++i) {
          if (!is_reduced(axes, i))
            ridx.push_back(idx[i]);
          else if (keepdims)
            ridx.push_back(zero);
        }
        store_out(emit(g_.root.get(), ridx), b_.CreateAdd(o, j, "", true, true));
        return std::vector<Value*>{};
      });
    } else {
      Idx idx = tile_idx;
      column_cache_live_ = !column_cache_.empty() || column_cache_in_output_;
      loop_nest(axes, dims, idx, {}, [&](const std::vector<Value*>&) {
        loop(zero, len, {}, [&](Value* j, const std::vector<Value*>&) {
          enter_column(j, idx, reds.size());
          root_idx_ = idx;
          store_out(emit(g_.root.get(), idx), linearize(idx, dims));
          return std::vector<Value*>{};
        });
        return std::vector<Value*>{};
      });
      column_cache_live_ = false;
    }
  });
}

}  // namespace kiln::llvmjit
