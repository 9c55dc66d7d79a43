// Reductions of a whole large tensor to one value, split in two so that threads share them.
// A row_reduce kernel is parallel over its outputs, so `((y - t) ** 2).mean()` ran on one thread.
// Here reduce(x) over every axis becomes reduce(reduce(x, trailing axes)): the inner reduction
// has P outputs (P the product of x's leading dims, 16 or more), each over N / P elements, and
// the outer one reduces those P partials. A 1-d x is viewed as [P, N / P] first, P a divisor of N
// in [16, 256]. Sums and means are the same values up to rounding (equal-sized groups: the mean
// of their means is the mean); max and min are exact. Only concrete shapes of at least
// kMinElements elements, with at least kMinPerPartial elements per partial, and not inside a
// composite (whose structure later passes rely on).
#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"

#include "ir/builder.h"

namespace kiln::ir {

namespace {

constexpr int64_t kMinElements = int64_t{1} << 18;
constexpr int64_t kMinPartials = 16;
constexpr int64_t kMaxPartials1d = 256;
constexpr int64_t kMinPerPartial = 256;

bool reduces_everything(const Node& n) {
  const Node& x = *n.inputs[0];
  return n.tag == Composite::none && !x.shape.empty() && is_concrete(x.shape) &&
         n.attrs.axes.size() == x.shape.size();
}

NodePtr split(const NodePtr& n) {
  if (!is_reduce(n->op) || !reduces_everything(*n)) return n;
  const NodePtr& x = n->inputs[0];
  const int64_t nd = static_cast<int64_t>(x->shape.size());
  const int64_t total = numel(x->shape);
  if (total < kMinElements) return n;
  LocScope scope(n->loc);  // the new nodes are the user's reduction
  NodePtr source = x;
  int64_t kept = 0;  // leading axes the inner reduction keeps
  int64_t partials = 1;
  while (kept < nd && partials < kMinPartials) partials *= x->shape[kept++].value;
  if (nd == 1) {
    partials = 0;
    for (int64_t p = kMaxPartials1d; p >= kMinPartials && !partials; --p)
      if (total % p == 0) partials = p;
    if (!partials) return n;
    source = make_reshape(x, {Dim::concrete(partials), Dim::concrete(total / partials)});
    kept = 1;
  } else if (kept == nd) {
    return n;
  }
  if (partials < kMinPartials || total / partials < kMinPerPartial) return n;
  const int64_t snd = static_cast<int64_t>(source->shape.size());
  std::vector<int64_t> inner_axes, all_axes;
  for (int64_t a = 0; a < snd; ++a) {
    if (a >= kept) inner_axes.push_back(a);
    all_axes.push_back(a);
  }
  NodePtr inner = make_reduce(n->op, source, inner_axes, true);
  NodePtr outer = make_reduce(n->op, inner, all_axes, true);
  if (outer->dtype != n->dtype) return n;
  return outer->shape == n->shape ? outer : make_reshape(outer, n->shape);
}

}  // namespace

Graph split_reductions(const Graph& g) { return rewrite_nodes(g, split); }

}  // namespace kiln::ir
