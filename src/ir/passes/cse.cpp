// Common subexpression elimination: nodes with the same structure (op, dtype, shape, attrs, tag
// and, once their inputs are canonical, the same input nodes) become one node. The first one in
// topological order is kept, with its source location.
#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"

#include <unordered_map>

namespace kiln::ir {

Graph cse(const Graph& g) {
  // Canonical nodes by structural hash; a bucket holds more than one node only on a collision.
  std::unordered_multimap<uint64_t, NodePtr> canonical;
  return rewrite_nodes(g, [&](NodePtr cur) {
    auto [lo, hi] = canonical.equal_range(cur->hash);
    for (auto it = lo; it != hi; ++it)
      if (shallow_equal(*it->second, *cur)) return it->second;
    canonical.emplace(cur->hash, cur);
    return cur;
  });
}

}  // namespace kiln::ir
