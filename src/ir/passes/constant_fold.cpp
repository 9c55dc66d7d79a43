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

// Values as the bytes of a Constant of `dtype` (rounded or wrapped as the interpreter does).
std::vector<uint8_t> to_bytes(const std::vector<double>& values, DType dtype) {
  const size_t size = dtype_size(dtype);
  std::vector<uint8_t> bytes(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i)
    encode_element(dtype, values[i], bytes.data() + i * size);
  return bytes;
}

HostTensor constant_value(const Node& n) {
  HostTensor t;
  t.dtype = n.dtype;
  t.shape = concrete_dims(n.shape);
  const int64_t count = numel(n.shape);
  t.values.resize(count);
  for (int64_t i = 0; i < count; ++i) t.values[i] = n.constant_at(i);
  return t;
}

bool small_enough(const Shape& s, int64_t limit) { return is_concrete(s) && numel(s) <= limit; }

// The values of the constant-valued nodes of the graph being folded (Constants and Expands of
// them).
class ConstantValues {
 public:
  // Null when `n` is not constant-valued or too large to materialize.
  const HostTensor* get(const Node& n) {
    if (auto it = values_.find(&n); it != values_.end()) return &it->second;
    if (n.op == Op::Constant) return &values_.emplace(&n, constant_value(n)).first->second;
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
        cur = make_constant(cur->dtype, cur->shape, to_bytes(result.values, cur->dtype));
      }
    }
    return cur;
  });
}

}  // namespace kiln::ir
