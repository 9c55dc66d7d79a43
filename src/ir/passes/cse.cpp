// Common subexpression elimination: nodes with the same structure (op, dtype, shape, attrs, tag
// and, once their inputs are canonical, the same input nodes) become one node. The first one in
// topological order is kept, with its source location.
#include "ir/passes/passes.h"

#include <unordered_map>

namespace kiln::ir {

Graph cse(const Graph& g) {
  std::unordered_map<const Node*, NodePtr> memo;
  // Canonical nodes by structural hash; a bucket holds more than one node only on a collision.
  std::unordered_multimap<uint64_t, NodePtr> canonical;
  auto mapped = [&](const NodePtr& n) { return memo.at(n.get()); };
  for (const NodePtr& n : g.topo_order()) {
    std::vector<NodePtr> ins;
    ins.reserve(n->inputs.size());
    bool changed = false;
    for (const NodePtr& in : n->inputs) {
      ins.push_back(mapped(in));
      changed = changed || ins.back() != in;
    }
    NodePtr cur = changed ? with_inputs(n, std::move(ins)) : n;
    NodePtr found;
    auto [lo, hi] = canonical.equal_range(cur->hash);
    for (auto it = lo; it != hi && !found; ++it)
      if (shallow_equal(*it->second, *cur)) found = it->second;
    if (!found) {
      canonical.emplace(cur->hash, cur);
      found = std::move(cur);
    }
    memo.emplace(n.get(), std::move(found));
  }
  Graph out;
  for (const NodePtr& in : g.inputs) out.inputs.push_back(mapped(in));
  for (const NodePtr& o : g.outputs) out.outputs.push_back(mapped(o));
  return out;
}

}  // namespace kiln::ir
