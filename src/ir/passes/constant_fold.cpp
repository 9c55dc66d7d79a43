// Constant folding: a node whose inputs are all constants (a Constant, or a Constant broadcast by
// Expand) is evaluated once by the reference interpreter and becomes a Constant. Broadcasts stay
// lazy: an Expand is never folded itself (its users fold through it), and no fold produces more
// than kMaxFoldedElements elements, so a big constant is never materialized in the graph.
#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "support/log.h"

#include <kiln/errors.h>

#include <cmath>
#include <cstring>
#include <unordered_map>

namespace kiln::ir {

namespace {

constexpr int64_t kMaxFoldedElements = 65536;
// An input broadcast this large is not materialized to fold a (small) reduction of it.
constexpr int64_t kMaxMaterializedElements = int64_t{1} << 20;

// A folded value as the bytes of a Constant of its dtype (integers exactly).
std::vector<uint8_t> to_bytes(const HostTensor& t) {
  const size_t size = dtype_size(t.dtype);
  const bool ints = holds_ints(t.dtype);
  std::vector<uint8_t> bytes(t.values.size() * size);
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (ints)
      encode_int_element(t.dtype, t.ints[i], bytes.data() + i * size);
    else
      encode_element(t.dtype, t.values[i], bytes.data() + i * size);
  }
  return bytes;
}

bool small_enough(const Shape& s, int64_t limit) { return is_concrete(s) && numel(s) <= limit; }

// The values of the constant-valued nodes of the graph being folded (Constants and Expands of
// them).
class ConstantValues {
 public:
  // Null when `n` is not constant-valued or too large to materialize.
  const HostTensor* get(const Node& n) {
    if (auto it = values_.find(&n); it != values_.end()) return &it->second;
    if (n.op == Op::Constant) return &values_.emplace(&n, eval_node(n, {})).first->second;
    if (n.op != Op::Expand || !small_enough(n.shape, kMaxMaterializedElements)) return nullptr;
    const HostTensor* src = get(*n.inputs[0]);
    if (!src) return nullptr;
    return &values_.emplace(&n, eval_node(n, {src})).first->second;
  }

 private:
  std::unordered_map<const Node*, HostTensor> values_;
};

}  // namespace

Graph constant_fold(const Graph& g) {
  ConstantValues values;
  return rewrite_nodes(g, [&](NodePtr cur) {
    if (op_kind(cur->op) != OpKind::leaf && cur->op != Op::Expand &&
        small_enough(cur->shape, kMaxFoldedElements)) {
      std::vector<const HostTensor*> args;
      for (const NodePtr& in : cur->inputs) {
        const HostTensor* v = values.get(*in);
        if (!v) break;
        args.push_back(v);
      }
      if (args.size() == cur->inputs.size()) {
        HostTensor result = eval_node(*cur, args);
        LocScope scope(cur->loc);
        cur = make_constant(cur->dtype, cur->shape, to_bytes(result));
      }
    }
    return cur;
  });
}

}  // namespace kiln::ir
