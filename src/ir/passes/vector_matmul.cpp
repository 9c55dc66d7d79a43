// Matmuls with a vector operand, reshaped so that their epilogue fuses. numpy's `W @ v` and
// `v @ W` (v 1-d) are traced as a matmul to [..., M, 1] or [..., 1, N] and a reshape dropping the
// unit dim; the elementwise ops after them (a bias, an activation) then read the reshape, which
// stood between the matmul and its epilogue, so the fusion pass could not hand them to the matmul's
// backend. Two rewrites:
//   - a float32 W @ v is computed as v^T @ W^T ([..., 1, K] @ [..., K, M], W read transposed in
//     place), so the vector result runs along the matmul's columns, where a bias vector is the
//     epilogue's bias. Only float32: those matmuls are the x86 GEMM backend's, which runs either
//     orientation alike; the LLVM loop nest that takes the other dtypes parallelizes over rows and
//     walks B's columns innermost, and ran the row form 6.5x (float64) to 87x (int32) slower at
//     1024 x 1024;
//   - a unit reshape (only size-1 dims added or dropped) of a matmul sinks below the elementwise
//     ops that read it: op(reshape(mm), y) becomes reshape(op(mm, reshape(y))), the same elements
//     in the same order, so the group is matmul + epilogue and a reshape of its result.
// A composite's tag moves with its root (every node of the composite is elementwise and sinks
// with it, so its structure is kept).
#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"

#include "ir/builder.h"

#include <unordered_set>

namespace kiln::ir {

namespace {

const Node* strip_expands(const Node* n) {
  while (n->op == Op::Expand) n = n->inputs[0].get();
  return n;
}

// v for a matmul operand traced from a 1-d v as a column [K, 1] (or a row [1, K]), possibly
// broadcast over batch dims; otherwise null.
NodePtr traced_vector(const NodePtr& operand, bool column) {
  const Node* r = strip_expands(operand.get());
  if (r->op != Op::Reshape || r->shape.size() != 2 || r->inputs[0]->ndim() != 1) return nullptr;
  if (!is_one(r->shape[column ? 1 : 0])) return nullptr;
  return r->inputs[0];
}

// A float32 W @ v as reshape(v^T @ W^T) to the matmul's shape [..., M, 1]; null when `mm` is not
// one.
NodePtr matmul_as_row(const NodePtr& mm) {
  if (mm->dtype != DType::f32) return nullptr;
  NodePtr v = traced_vector(mm->inputs[1], true);
  if (!v || traced_vector(mm->inputs[0], false)) return nullptr;
  const NodePtr& w = mm->inputs[0];
  const size_t nd = w->shape.size();
  std::vector<int64_t> perm(nd);
  for (size_t d = 0; d < nd; ++d) perm[d] = static_cast<int64_t>(d);
  std::swap(perm[nd - 2], perm[nd - 1]);
  Shape row(mm->shape.begin(), mm->shape.end() - 2);  // [batch..., 1, K]
  row.push_back(Dim::concrete(1));
  row.push_back(v->shape[0]);
  NodePtr a = make_expand(make_reshape(v, {Dim::concrete(1), v->shape[0]}), row);
  return make_reshape(make_matmul(a, make_permute(w, std::move(perm))), mm->shape);
}

class Sinker {
 public:
  NodePtr operator()(NodePtr cur) {
    LocScope scope(cur->loc);
    if (cur->op == Op::MatMul)
      if (NodePtr row = matmul_as_row(cur)) return row;
    // The trace's reshape of a rewritten matmul: one reshape of the row product.
    if (cur->op == Op::Reshape && cur->inputs[0]->op == Op::Reshape) {
      const NodePtr& src = cur->inputs[0]->inputs[0];
      if (src->op == Op::MatMul && is_unit_reshape(cur->shape, src->shape))
        return make_reshape(src, cur->shape);
    }
    if (!is_elementwise(cur->op)) return cur;
    const Node* lead = nullptr;
    for (const NodePtr& in : cur->inputs)
      if (in->op == Op::Reshape && sinkable_source(*in) && in->shape == cur->shape) {
        lead = in.get();
        break;
      }
    if (!lead) return cur;
    const Shape& to = lead->inputs[0]->shape;
    std::vector<NodePtr> ins;
    for (const NodePtr& in : cur->inputs) {
      if (in->shape != cur->shape) return cur;  // inputs are broadcast by the builders
      if (in->op == Op::Reshape && sinkable_source(*in) && in->inputs[0]->shape == to)
        ins.push_back(in->inputs[0]);
      else if (const Node* s = strip_expands(in.get()); s->shape.empty())
        ins.push_back(make_expand(in->op == Op::Expand ? in->inputs[0] : in, to));
      else
        ins.push_back(make_reshape(in, to));
    }
    NodePtr sunk = make_node(cur->op, cur->dtype, to, std::move(ins), cur->attrs, cur->tag);
    sunk_.insert(sunk.get());
    return make_reshape(sunk, cur->shape);
  }

 private:
  // A reshape that may sink: a unit reshape of a matmul or of an op sunk by this pass.
  bool sinkable_source(const Node& reshape) const {
    const Node* src = reshape.inputs[0].get();
    return (src->op == Op::MatMul || sunk_.count(src)) &&
           is_unit_reshape(reshape.shape, src->shape);
  }

  std::unordered_set<const Node*> sunk_;
};

}  // namespace

Graph vector_matmul(const Graph& g) { return rewrite_nodes(g, Sinker{}); }

}  // namespace kiln::ir
