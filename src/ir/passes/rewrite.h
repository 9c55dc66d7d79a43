// The shape every local graph pass shares: visit nodes in topological order, rebuild each with its
// inputs already rewritten, and let the pass replace it. Iterative (graphs can be deep).
#pragma once

#include "ir/node.h"

#include <unordered_map>
#include <vector>

namespace kiln::ir {

// `fn(node)` receives the node with rewritten inputs and returns its replacement (or the node).
template <typename Fn>
Graph rewrite_nodes(const Graph& g, Fn&& fn) {
  std::unordered_map<const Node*, NodePtr> memo;
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
    memo.emplace(n.get(), fn(std::move(cur)));
  }
  Graph out;
  for (const NodePtr& in : g.inputs) out.inputs.push_back(mapped(in));
  for (const NodePtr& o : g.outputs) out.outputs.push_back(mapped(o));
  return out;
}

}  // namespace kiln::ir
