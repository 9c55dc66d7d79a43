// Matching a fusion group to the x86 GEMM (x86_backend.cpp): root = [residual +] act([bias +]
// [scale *] contraction), or a gated product, with A, B, the bias, the column scale and the
// residual as strided views of the group's leaves.
#pragma once

#include "codegen/backend.h"
#include "codegen/x86/gemm.h"
#include "ir/passes/fusion.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::x86 {

// Element (i_0, ..., i_n) of an operand is at leaf[offset + sum_d i_d * mult_d * stride(dim_d)],
// offset = sum_e off_e * stride(e), where stride() are the leaf's strides at run time.
struct OperandView {
  int leaf = -1;
  std::vector<int> dim;         // leaf dim per operand dim, -1 when broadcast (stride 0)
  std::vector<int64_t> mult;    // multiplier per operand dim
  std::vector<int64_t> offset;  // per leaf dim
};

// Into v: n as a strided view of one of the leaves (leaf_index: node -> leaf number); false where
// n is computed or a view that is not strided.
bool resolve_view(const ir::Node* n, const std::unordered_map<const ir::Node*, int>& leaf_index,
                  OperandView& v);

// What a matched group runs: the GEMM's operands and its epilogue's terms.
struct GroupPlan {
  OperandView a, b, bias, residual, col_scale;
  bool has_bias = false, has_residual = false;
  bool residual_mul = false;  // the residual multiplies (a gate)
  // A vector along N multiplying the product (the kernel's column scale); col_scale_post: it
  // multiplies the bias terms too (LayerScale: g * (x @ w + b)).
  bool has_col_scale = false, col_scale_post = false;
  // The bias the kernel adds is ((bias_negated ? -bias : bias) + bias_const) * bias_mult, times
  // the column scale where col_scale_post (x @ w - b, x @ w + 1, (x @ w + b) / 2,
  // g * (x @ w + b)): made per call into a per-thread vector when any of them is in use.
  bool bias_negated = false, has_bias_const = false;
  float bias_const = 0.0f, bias_mult = 1.0f;
  bool bias_made_per_call() const {
    return bias_negated || has_bias_const || (has_bias && (bias_mult != 1.0f || col_scale_post));
  }
  float scale = 1.0f;
  Activation act = Activation::none;
  ir::Shape out_dims;  // [batch..., M, N], possibly symbolic
  ir::Dim K;
};

// Why a group does not match; `epilogue` means the GEMM itself would be fine without its epilogue.
struct Mismatch {
  enum class Kind : uint8_t { none, epilogue, operand };
  Kind kind = Kind::none;
  std::string why;
};

// Matches root = [residual +] act([bias +] [scale *] contraction), or with the residual a factor
// (a gate: silu(x @ w1) * (x @ w3), the other product a stored leaf), into p.
Mismatch match(const ir::FusionGroup& g, const std::unordered_map<const ir::Node*, int>& leaf_index,
               const std::vector<LeafLayout>& layouts, GroupPlan& p);

}  // namespace kiln::x86
