// Matching a fusion group to the x86 GEMM: operands resolved as strided views of leaves, the
// epilogue peeled off the root down to the contraction (group_match.h).
#include "codegen/x86/group_match.h"

#include <algorithm>

namespace kiln::x86 {

using ir::Node;
using ir::Op;

bool resolve_view(const Node* n, const std::unordered_map<const Node*, int>& leaf_index,
                  OperandView& v) {
  size_t nd = n->shape.size();
  v.dim.resize(nd);
  v.mult.assign(nd, 1);
  for (size_t d = 0; d < nd; ++d) v.dim[d] = static_cast<int>(d);
  std::vector<int64_t> off(nd, 0);  // offset per dim of the current node
  const Node* cur = n;
  while (!leaf_index.count(cur)) {
    if (!ir::is_view(cur->op)) return false;  // computed values are not views of a buffer
    const Node& in = *cur->inputs[0];
    std::vector<int> remap(cur->shape.size(), -1);  // current dim -> input dim
    std::vector<int64_t> in_off(in.shape.size(), 0);
    switch (cur->op) {
      case Op::Expand: {
        size_t o = cur->shape.size() - in.shape.size();
        for (size_t i = 0; i < in.shape.size(); ++i)
          if (in.shape[i].value != 1 || cur->shape[i + o].value == 1)
            remap[i + o] = static_cast<int>(i);
        break;
      }
      case Op::Permute:
        for (size_t i = 0; i < cur->attrs.perm.size(); ++i)
          remap[i] = static_cast<int>(cur->attrs.perm[i]);
        break;
      case Op::Slice:
        for (size_t i = 0; i < in.shape.size(); ++i) {
          remap[i] = static_cast<int>(i);
          in_off[i] = cur->attrs.starts[i];
        }
        break;
      case Op::Reshape: {
        std::vector<std::pair<size_t, size_t>> pairs;
        if (!ir::is_unit_reshape(cur->shape, in.shape, &pairs)) return false;
        for (auto [o, i] : pairs) remap[o] = static_cast<int>(i);
        break;
      }
      default:
        return false;  // computed values are not views of a buffer
    }
    // Compose: index into cur dim e becomes index into input dim remap[e] (times step for slices).
    for (size_t e = 0; e < cur->shape.size(); ++e) {
      int r = remap[e];
      if (r >= 0) {
        int64_t step = cur->op == Op::Slice ? cur->attrs.steps[r] : 1;
        in_off[r] += off[e] * step;
      }
    }
    for (size_t d = 0; d < nd; ++d) {
      if (v.dim[d] < 0) continue;
      int r = remap[v.dim[d]];
      if (r < 0) {
        v.dim[d] = -1;
        continue;
      }
      if (cur->op == Op::Slice) v.mult[d] *= cur->attrs.steps[r];
      v.dim[d] = r;
    }
    off = std::move(in_off);
    cur = &in;
  }
  v.leaf = leaf_index.at(cur);
  v.offset = off;
  return true;
}

namespace {

const Node* strip_scalar(const Node* n, double* value) {
  // An inline scalar constant (possibly under views): its value.
  const Node* c = n;
  while (c->op != Op::Constant) {
    if (!ir::is_view(c->op)) return nullptr;
    c = c->inputs[0].get();
  }
  if (!c->shape.empty()) return nullptr;
  *value = c->constant_at(0);
  return c;
}

// For n = y * s, s * y, y / s (s a scalar, not 0 when dividing) or -y: y, with *factor = s, 1 / s
// or -1; otherwise null.
const Node* strip_scale(const Node* n, double* factor) {
  if (n->op == Op::Neg) {
    *factor = -1;
    return n->inputs[0].get();
  }
  if (n->op != Op::Mul && n->op != Op::Div) return nullptr;
  double s = 0;
  const Node* other = nullptr;
  if (strip_scalar(n->inputs[1].get(), &s))
    other = n->inputs[0].get();
  else if (n->op == Op::Mul && strip_scalar(n->inputs[0].get(), &s))
    other = n->inputs[1].get();
  if (!other || (n->op == Op::Div && s == 0)) return nullptr;
  *factor = n->op == Op::Div ? 1.0 / s : s;
  return other;
}

}  // namespace

Mismatch match(const ir::FusionGroup& g, const std::unordered_map<const Node*, int>& leaf_index,
               const std::vector<LeafLayout>& layouts, GroupPlan& p) {
  const Node* mm = g.contraction.get();
  const Node* cur = g.root.get();
  auto dense_leaf_of_shape = [&](const Node* n, const ir::Shape& shape, OperandView& v) {
    if (n->shape != shape || !resolve_view(n, leaf_index, v)) return false;
    return !layouts[v.leaf].runtime_strides;
  };
  // C's rows and columns are the dense leaf's last two dims (or their leading part: a slice from
  // 0), unit-stride along a row; batch dims may map to any of its other dims or be broadcast (an
  // attention mask over batch and heads). One row may serve every row of C (ld_residual 0: a
  // vector along N, as b in relu(x @ w) * b or W @ v + b), and where C has a single column that
  // dim may be broadcast.
  auto residual_view = [&](const Node* r, OperandView& v) {
    if (!dense_leaf_of_shape(r, mm->shape, v) ||
        !std::all_of(v.offset.begin(), v.offset.end(), [](int64_t o) { return o == 0; }))
      return false;
    const size_t nd = v.dim.size();
    const int ld = static_cast<int>(g.leaves[v.leaf]->shape.size());
    if (nd < 2) return false;
    const bool row_bcast = v.dim[nd - 2] < 0;
    const bool one_col = v.dim[nd - 1] < 0 && ir::is_one(mm->shape[nd - 1]);
    bool ok = (one_col || (v.dim[nd - 1] == ld - 1 && v.mult[nd - 1] == 1)) &&
              (row_bcast || (v.dim[nd - 2] == ld - 2 && v.mult[nd - 2] == 1));
    const int first_of_row = !row_bcast ? ld - 2 : !one_col ? ld - 1 : ld;
    for (size_t d = 0; d + 2 < nd; ++d) ok = ok && (v.dim[d] < first_of_row);
    return ok;
  };
  // A composite's root (silu is x * sigmoid(x)) is not a gate.
  if (cur != mm &&
      (cur->op == Op::Add || (cur->op == Op::Mul && cur->tag == ir::Composite::none))) {
    for (int side = 0; side < 2 && !p.has_residual; ++side) {
      OperandView v;
      if (!residual_view(cur->inputs[side].get(), v)) continue;
      p.residual = v;
      p.has_residual = true;
      p.residual_mul = cur->op == Op::Mul;
      cur = cur->inputs[1 - side].get();
    }
  }
  // A bias varies along N only, with unit stride in a dense leaf.
  auto bias_view = [&](const Node* bnode, OperandView& v) {
    if (bnode->shape != mm->shape || !resolve_view(bnode, leaf_index, v) ||
        layouts[v.leaf].runtime_strides)
      return false;
    const ir::Shape& ls = g.leaves[v.leaf]->shape;
    // With one column, the bias is one element (of a leaf [1], say, for W @ v with W [1, K]).
    if (ir::is_one(mm->shape.back()) && v.dim.back() < 0) {
      bool ok = true;
      for (int d : v.dim) ok = ok && (d < 0 || ir::is_one(ls[d]));
      return ok;
    }
    bool ok = v.dim.back() >= 0 && v.mult.back() == 1 && ls[v.dim.back()] == mm->shape.back();
    // Other dims broadcast, or on a size-1 dim of the leaf (a folded constant [1, N]).
    for (size_t d = 0; d + 1 < v.dim.size(); ++d)
      ok = ok && (v.dim[d] < 0 || ir::is_one(ls[v.dim[d]]));
    for (size_t e = v.dim.back() + 1; e < ls.size(); ++e) ok = ok && ir::is_one(ls[e]);
    return ok;
  };
  // A scale after the activation folds into the scale and bias before it where
  // act(s * y) == s * act(y): with no activation, or relu and s > 0 ((x @ w + b) / 2,
  // relu(x @ w + b) * 2); checked once the activation is known.
  double post = 1;
  if (double s = 1; cur != mm && cur->tag == ir::Composite::none) {
    if (const Node* y = strip_scale(cur, &s); y && y != mm) {
      post = s;
      cur = y;
    }
  }
  // A vector along N multiplying one side (a column scale): before the activation, or after the
  // bias terms with no activation (LayerScale: x + g * (h @ w + b)). Taken here as the latter;
  // where no bias term follows it is the same as the former.
  auto take_col_scale = [&]() {
    if (p.has_col_scale || cur == mm || cur->op != Op::Mul || cur->tag != ir::Composite::none)
      return false;
    for (int side = 0; side < 2; ++side) {
      OperandView v;
      if (!bias_view(cur->inputs[side].get(), v)) continue;
      p.col_scale = v;
      p.has_col_scale = true;
      cur = cur->inputs[1 - side].get();
      return true;
    }
    return false;
  };
  p.col_scale_post = take_col_scale();
  if (cur != mm) {
    const Node* x = nullptr;
    switch (cur->tag) {
      case ir::Composite::gelu:
        p.act = x86::Activation::gelu;
        x = cur->inputs[0]->inputs[0].get();
        break;
      case ir::Composite::gelu_tanh:
        p.act = x86::Activation::gelu_tanh;
        x = cur->inputs[0]->inputs[0].get();
        break;
      case ir::Composite::silu:
        p.act = x86::Activation::silu;
        x = cur->inputs[0].get();
        break;
      default:
        if (cur->op == Op::Relu) {
          p.act = x86::Activation::relu;
          x = cur->inputs[0].get();
        }
    }
    if (x) cur = x;
  }
  if (post != 1 &&
      !(p.act == x86::Activation::none || (p.act == x86::Activation::relu && post > 0)))
    return {Mismatch::Kind::epilogue,
            "a scale after the activation (only relu with a positive "
            "scale, or no activation, takes one)"};
  if (p.col_scale_post && p.act != x86::Activation::none)
    return {Mismatch::Kind::epilogue, "a column scale after the activation"};
  // Up to one bias vector and one scalar, added or subtracted, on either side: a term left of a
  // subtraction negates what is below it (b - x @ w is -(x @ w) + b), `sign` of the rest.
  double sign = 1;
  for (int term = 0; term < 2 && cur != mm && (cur->op == Op::Add || cur->op == Op::Sub); ++term) {
    const bool sub = cur->op == Op::Sub;
    int taken = -1;
    for (int k = 0; k < 2 && taken < 0; ++k) {
      const int side = sub ? 1 - k : k;  // a subtraction's right side first
      const Node* t = cur->inputs[side].get();
      const double coeff = sub && side == 1 ? -sign : sign;
      double c = 0;
      OperandView v;
      if (!p.has_bias_const && strip_scalar(t, &c)) {
        p.has_bias_const = true;
        p.bias_const = static_cast<float>(coeff * c);
        taken = side;
      } else if (!p.has_bias && bias_view(t, v)) {
        p.bias = v;
        p.has_bias = true;
        p.bias_negated = coeff < 0;
        taken = side;
      }
    }
    if (taken < 0) break;
    if (sub && taken == 0) sign = -sign;
    cur = cur->inputs[1 - taken].get();
  }
  // The scalar and column scales of the product, in either order.
  double scale = 1;
  for (int f = 0; f < 2 && cur != mm; ++f) {
    double s = 1;
    if (const Node* y = strip_scale(cur, &s)) {
      scale *= s;
      cur = y;
    } else if (!take_col_scale()) {
      break;
    }
  }
  // The scale after the activation, and the sign, folded in.
  p.scale = static_cast<float>(scale * post * sign);
  p.bias_mult = static_cast<float>(post);
  if (cur != mm)
    return {Mismatch::Kind::epilogue, "epilogue op " + std::string(ir::op_name(cur->op)) +
                                          " is not of the form act(scale * A@B + bias) + residual"};
  if (!resolve_view(mm->inputs[0].get(), leaf_index, p.a) ||
      !resolve_view(mm->inputs[1].get(), leaf_index, p.b))
    return {Mismatch::Kind::operand, "an operand is not a strided view of a buffer"};
  p.out_dims = mm->shape;
  p.K = mm->inputs[0]->shape.back();
  return {};
}

}  // namespace kiln::x86
