// The emitter behind lower_group (lower_group.h): lowers one fused group to an LLVM function, one
// loop nest per group kind. Private to src/codegen/llvm: lower_group.cpp holds the emitter's core
// (extents, loops, values, elementwise kernels), lower_reduce.cpp its row_reduce kernels and
// lower_contraction.cpp its matmul and conv2d loop nests.
#pragma once

#include "codegen/llvm/lower_group.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::llvmjit {

// For the emitter's two source files (this header is theirs alone).
using ir::Node;
using ir::Op;
using llvm::Value;
using Idx = std::vector<Value*>;

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, const ir::FusionGroup& g, const std::vector<LeafLayout>& layouts,
          DType out_storage, const ir::SymbolFacts& facts);
  std::unique_ptr<llvm::Module> run();

 private:
  // ---- extents ----------------------------------------------------------------------------
  // Symbols' extents are loaded once in the entry block (they dominate every use). A symbol known
  // to be a multiple of kSymbolMultiple is rebuilt as (v >> 4) << 4, which LLVM's known-bits
  // analysis sees, so vectorized loops over it need no remainder.
  void load_symbols(Value* dims);
  Value* dimv(const ir::Dim& d);
  std::vector<Value*> dimvs(const ir::Shape& s);
  Value* mul_nsw(Value* a, Value* c) { return b_.CreateMul(a, c, "", true, true); }
  // Row-major strides of a dense buffer of this shape (size-1 and 0 dims count as 1).
  std::vector<Value*> row_major(const ir::Shape& s);
  Value* load_ptr(Value* bufs, size_t j);

  // ---- loops ------------------------------------------------------------------------------
  // for (iv = lo; iv < hi; ++iv) body(iv), carrying `carried` values through the loop. With
  // `unroll` false, LLVM is told not to unroll it (it may still vectorize it).
  std::vector<Value*> loop(
      Value* lo, Value* hi, std::vector<Value*> carried,
      const std::function<std::vector<Value*>(Value*, const std::vector<Value*>&)>& body,
      bool unroll = true);
  // Nested loops over `axes` of `dims`, filling idx[axis]; the innermost loop is the last axis.
  std::vector<Value*> loop_nest(
      const std::vector<int64_t>& axes, const ir::Shape& dims, Idx& idx,
      std::vector<Value*> carried,
      const std::function<std::vector<Value*>(const std::vector<Value*>&)>& body, size_t level = 0);
  // while (lin < end): body(lin, row, col0, n) for the next piece of a row of `width` columns, n
  // columns from col0 (to the row's end, `end` or `cap` columns, whichever comes first; cap 0:
  // no cap).
  void row_pieces(Value* width, int64_t cap,
                  const std::function<void(Value*, Value*, Value*, Value*)>& body);
  // Splits a linear index over `dims` (row-major) into per-dim indices.
  Idx delinearize(Value* lin, const ir::Shape& dims);
  Value* linearize(const Idx& idx, const ir::Shape& dims);

  // ---- values -----------------------------------------------------------------------------
  Value* load_leaf(int j, const Idx& idx);
  void store_out(Value* v, Value* offset);
  Value* emit(const Node* n, const Idx& idx);
  Value* emit_uncached(const Node& n, const Idx& idx);
  Idx view_index(const Node& n, const Idx& idx);
  Value* emit_concat(const Node& n, const Idx& idx);
  // The contraction's value inside its epilogue: only at the element being stored.
  Value* contraction_value(const Node& n, const Idx& idx);
  // Stores the root for the current contraction element (value `v` at index `idx`).
  void store_epilogue(Value* v, const Idx& idx, Value* offset);

  // ---- reductions (lower_reduce.cpp) ---------------------------------------------------------
  // A reduction's value where the group reads it: only at the outputs being computed.
  Value* reduced_value(const Node& n, const Idx& idx);
  // for (blk = 0; blk < ceil(extent / block); ++blk) body([lo, hi) of that block), carrying values.
  std::vector<Value*> block_loop(
      Value* extent, int64_t block, std::vector<Value*> carried,
      const std::function<std::vector<Value*>(Value*, Value*, const std::vector<Value*>&)>& body,
      bool unroll = true);
  // Reduction n's accumulator over the reduced axes at the kept index in idx (rows kernel).
  Value* accumulate_row(const Node& n, Idx idx);
  // An accumulator as n's value: a mean divided by its count, then rounded to the compute type.
  Value* finish_reduce(const Node& n, Value* acc);
  void emit_reduce_rows();
  void emit_reduce_columns();
  // Rows kernel: the reductions' inputs the root reads again at the same elements (softmax's
  // exp(x - max), summed, then divided by the sum) are kept for the row in row_cache_ when the
  // only reduced axis is the last and its extent is concrete and short; the root reads them there
  // (row_cache_live_) instead of computing them twice. Where none fit (a longer or symbolic
  // row), one of them is kept in the output itself (kept_in_output).
  void plan_row_cache();
  Value* cached_row_value(const Node& n, const Idx& idx);
  // Those reductions' inputs (computed, not loads or views) in the order of g_.nodes.
  std::vector<const Node*> reduced_inputs_read_again();
  // The first of them whose compute type is the output's storage type (float32 into a float32
  // output; not float16 or bfloat16): the output can hold it until the root at the same element
  // overwrites it (the root's value is computed from it first), so it is read there only at
  // root_idx_ (kept_output_value; elsewhere it is computed again). Null if none.
  const Node* kept_in_output();
  Value* output_slot(const Idx& idx);  // the output's element at a domain index
  Value* kept_output_value(const Idx& idx);
  // Columns kernel: the same, where the one reduced axis has a short concrete extent, kept for a
  // tile's columns over that whole axis in column_cache_; returns the tile, narrowed so that they
  // fit kColumnCacheBytes (it is left as given where none are kept). Where none fit (a longer or
  // symbolic axis), one is kept in the output (kept_in_output).
  int64_t plan_column_cache(int64_t tile);
  // Where n's value at idx is kept (idx at the current column: column_j_ of the tile).
  Value* column_cache_slot(const Node& n, const Idx& idx);
  Value* cached_column_value(const Node& n, const Idx& idx);

  // ---- kernels ----------------------------------------------------------------------------
  void emit_elementwise();
  void emit_row_reduce();
  void emit_matmul();
  Value* fma(Value* a, Value* c, Value* acc);
  // max(0, ceil(num / den)) and min(limit, floor(num / den) + 1) for den > 0, num signed.
  Value* ceil_div_clamped(Value* num, int64_t den);
  Value* floor_div_plus1_clamped(Value* num, int64_t den, int64_t limit);
  void emit_conv2d();

  // ---- state ----------------------------------------------------------------------------
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
  std::unordered_map<const Node*, llvm::AllocaInst*> row_cache_;
  bool row_cache_live_ = false;
  const Node* row_cache_in_output_ = nullptr;
  std::unordered_map<const Node*, llvm::AllocaInst*> column_cache_;
  int64_t column_cache_tile_ = 0;
  Value* column_j_ = nullptr;  // the columns kernel's position in its tile
  bool column_cache_live_ = false;
  const Node* column_cache_in_output_ = nullptr;
  Idx root_idx_;  // the root's index while it is computed (the output's element)
  std::map<std::pair<const Node*, Idx>, Value*> memo_;
};

}  // namespace kiln::llvmjit
