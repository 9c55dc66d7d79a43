// Algebraic simplification: identities that hold bit for bit on every value of the node's dtype
// (x*1, x+0, x-0, x/1, -(-x)), and views and casts that compose or cancel. Float x*0 is NOT
// rewritten to 0: it is NaN for x = NaN or inf. A node with a composite tag is never rewritten
// away, so that backends can still match the composite whole.
#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"

#include "ir/builder.h"

#include <kiln/errors.h>

#include <unordered_map>

namespace kiln::ir {

namespace {

// The scalar a node holds when it is a scalar Constant, possibly broadcast by Expand nodes.
const Node* scalar_source(const Node* n) {
  while (n->op == Op::Expand) n = n->inputs[0].get();
  return n->is_scalar_constant() ? n : nullptr;
}

bool is_scalar_value(const NodePtr& n, double v) {
  const Node* s = scalar_source(n.get());
  return s && s->constant_at(0) == v;
}

// `x` with `like`'s dtype and shape, or null when `x` cannot be broadcast to that shape.
NodePtr conform(NodePtr x, const Node& like) {
  if (x->dtype != like.dtype) x = make_cast(x, like.dtype);
  if (x->shape == like.shape) return x;
  try {
    return make_expand(x, like.shape);
  } catch (const ShapeError&) {
    return nullptr;
  }
}

// Every value of `from` is exactly representable in `to`.
bool holds_all_values(DType from, DType to) {
  if (from == to || from == DType::boolean) return true;
  switch (from) {
    case DType::i8:
      return to == DType::i32 || to == DType::i64 || is_floating(to);  // |v| <= 128 fits bf16
    case DType::i32:
      return to == DType::i64 || to == DType::f64;
    case DType::f16:
    case DType::bf16:
      return to == DType::f32 || to == DType::f64;
    case DType::f32:
      return to == DType::f64;
    default:
      return false;
  }
}

// x op c where c is a scalar identity of op on the right (and on the left for + and *).
NodePtr simplify_binary(const NodePtr& n) {
  const NodePtr& a = n->inputs[0];
  const NodePtr& b = n->inputs[1];
  NodePtr keep;
  switch (n->op) {
    case Op::Mul:
      if (is_scalar_value(b, 1))
        keep = a;
      else if (is_scalar_value(a, 1))
        keep = b;
      break;
    case Op::Add:
      if (is_scalar_value(b, 0))
        keep = a;
      else if (is_scalar_value(a, 0))
        keep = b;
      break;
    case Op::Sub:
      if (is_scalar_value(b, 0)) keep = a;
      break;
    case Op::Div:
      if (is_scalar_value(b, 1)) keep = a;
      break;
    default:
      break;
  }
  return keep ? conform(keep, *n) : nullptr;
}

NodePtr simplify_cast(const NodePtr& n) {
  const NodePtr& x = n->inputs[0];
  if (x->dtype == n->dtype) return x;
  // cast(cast(y, B), C) == cast(y, C) when B holds every value of y's dtype (cast is by value).
  if (x->op == Op::Cast && holds_all_values(x->inputs[0]->dtype, x->dtype))
    return make_cast(x->inputs[0], n->dtype);
  return nullptr;
}

NodePtr simplify_view(const NodePtr& n) {
  const NodePtr& x = n->inputs[0];
  switch (n->op) {
    case Op::Expand:
      if (x->shape == n->shape) return x;
      if (x->op == Op::Expand) return make_expand(x->inputs[0], n->shape);
      return nullptr;
    case Op::Reshape:
      if (x->shape == n->shape) return x;
      if (x->op == Op::Reshape) return make_reshape(x->inputs[0], n->shape);
      return nullptr;
    case Op::Permute: {
      std::vector<int64_t> perm = n->attrs.perm;
      if (x->op == Op::Permute) {
        // Output dim i is x's dim perm[i], which is x's input dim x.perm[perm[i]].
        for (int64_t& p : perm) p = x->attrs.perm[p];
        return make_permute(x->inputs[0], std::move(perm));  // drops an identity
      }
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] != static_cast<int64_t>(i)) return nullptr;
      return x;
    }
    case Op::Slice: {
      const Attrs& a = n->attrs;
      bool identity = x->shape == n->shape;
      for (size_t i = 0; identity && i < a.starts.size(); ++i)
        identity = a.starts[i] == 0 && a.steps[i] == 1;
      return identity ? x : nullptr;
    }
    default:
      return nullptr;
  }
}

// The node `n` rewritten, or null when no rule applies.
NodePtr rewrite(const NodePtr& n) {
  if (n->tag != Composite::none) return nullptr;
  switch (op_kind(n->op)) {
    case OpKind::unary:
      if (n->op == Op::Neg && n->inputs[0]->op == Op::Neg) return n->inputs[0]->inputs[0];
      return nullptr;
    case OpKind::binary:
      return simplify_binary(n);
    case OpKind::cast:
      return simplify_cast(n);
    case OpKind::view:
      return simplify_view(n);
    default:
      return nullptr;
  }
}

}  // namespace

Graph simplify(const Graph& g) {
  return rewrite_nodes(g, [](NodePtr cur) {
    // A rewrite may expose another (cast(cast(cast x)), or a permute that became the identity);
    // each one removes a node or keeps the count, so a few rounds reach the local fixed point.
    for (int round = 0; round < 4; ++round) {
      LocScope scope(cur->loc);
      NodePtr next = rewrite(cur);
      if (!next || next == cur) break;
      cur = std::move(next);
    }
    return cur;
  });
}

}  // namespace kiln::ir
