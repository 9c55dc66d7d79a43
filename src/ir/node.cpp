#include "ir/node.h"

#include <kiln/errors.h>

#include "ir/interpreter.h"
#include "support/check.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir {

namespace {

struct Hasher {
  XXH3_state_t* st = XXH3_createState();
  Hasher() { XXH3_64bits_reset(st); }
  ~Hasher() { XXH3_freeState(st); }
  template <typename T>
  void add(const T& v) {
    XXH3_64bits_update(st, &v, sizeof(T));
  }
  void add_vec(const std::vector<int64_t>& v) {
    add(v.size());
    if (!v.empty()) XXH3_64bits_update(st, v.data(), v.size() * sizeof(int64_t));
  }
  uint64_t digest() { return XXH3_64bits_digest(st); }
};

void add_attrs(Hasher& h, Op op, const Attrs& a) {
  h.add(a.arg);
  h.add(a.axis);
  h.add_vec(a.perm);
  h.add_vec(a.axes);
  h.add_vec(a.starts);
  h.add_vec(a.steps);
  if (op == Op::Conv2d) {
    for (int i = 0; i < 2; ++i) {
      h.add(a.conv.stride[i]);
      h.add(a.conv.padding[i]);
      h.add(a.conv.dilation[i]);
    }
    h.add(a.conv.groups);
  }
  if (a.data) h.add(a.data->hash);
}

thread_local std::string tls_loc;

}  // namespace

bool Attrs::operator==(const Attrs& o) const {
  if (arg != o.arg || axis != o.axis || perm != o.perm || axes != o.axes || starts != o.starts ||
      steps != o.steps)
    return false;
  for (int i = 0; i < 2; ++i)
    if (conv.stride[i] != o.conv.stride[i] || conv.padding[i] != o.conv.padding[i] ||
        conv.dilation[i] != o.conv.dilation[i])
      return false;
  if (conv.groups != o.conv.groups) return false;
  if ((data == nullptr) != (o.data == nullptr)) return false;
  if (data && data != o.data && (data->hash != o.data->hash || data->bytes != o.data->bytes))
    return false;
  return true;
}

Node::~Node() {
  // Release input chains iteratively: a recursive release overflows the stack on deep graphs.
  std::vector<NodePtr> pending = std::move(inputs);
  while (!pending.empty()) {
    NodePtr n = std::move(pending.back());
    pending.pop_back();
    if (n.use_count() == 1) {                    // the last owner: take its inputs before it dies
      auto& ins = const_cast<Node&>(*n).inputs;  // nodes are created non-const (make_node)
      for (NodePtr& in : ins) pending.push_back(std::move(in));
      ins.clear();
    }
  }
}

double Node::constant_at(int64_t i) const {
  KILN_CHECK(op == Op::Constant && attrs.data);
  return decode_element(dtype, attrs.data->bytes.data() + i * dtype_size(dtype));
}

int64_t Node::constant_int_at(int64_t i) const {
  KILN_CHECK(op == Op::Constant && attrs.data && !is_floating(dtype));
  const uint8_t* p = attrs.data->bytes.data() + i * dtype_size(dtype);
  switch (dtype) {
    case DType::i8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      return *p != 0;  // bool
  }
}

void check_shape_limits(Op op, DType dtype, const Shape& shape) {
  const std::string where = tls_loc.empty() ? std::string() : " (at " + tls_loc + ")";
  // The API's name where the IR's differs.
  const std::string name = op == Op::Expand    ? "broadcast_to"
                           : op == Op::Concat  ? "concatenate"
                           : op == Op::Permute ? "transpose"
                                               : std::string(op_name(op));
  if (shape.size() > kMaxDims)
    throw ShapeError(name + ": a shape of " + std::to_string(shape.size()) + " dims; at most " +
                     std::to_string(kMaxDims) + " are supported" + where);
  int64_t n = static_cast<int64_t>(dtype_size(dtype));
  for (const Dim& d : shape)
    if (!d.is_symbolic() && d.value != 0 && __builtin_mul_overflow(n, d.value, &n))
      throw ShapeError(name + ": shape " + shape_str(shape) + " of " +
                       std::string(dtype_name(dtype)) + " has more bytes than 2^63 - 1" + where);
}

NodePtr make_node(Op op, DType dtype, Shape shape, std::vector<NodePtr> inputs, Attrs attrs,
                  Composite tag) {
  check_shape_limits(op, dtype, shape);
  auto n = std::make_shared<Node>();
  n->op = op;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->inputs = std::move(inputs);
  n->attrs = std::move(attrs);
  n->tag = tag;
  n->loc = tls_loc;
  Hasher h;
  h.add(op);
  h.add(dtype);
  h.add(tag);
  h.add(n->shape.size());
  for (const Dim& d : n->shape) {
    h.add(d.value);
    h.add(d.sym);
  }
  h.add(n->inputs.size());
  for (const NodePtr& in : n->inputs) {
    KILN_CHECK(in != nullptr) << "null input to " << op_name(op);
    h.add(in->hash);
  }
  add_attrs(h, op, n->attrs);
  n->hash = h.digest();
  return n;
}

bool shallow_equal(const Node& a, const Node& b) {
  if (a.hash != b.hash || a.op != b.op || a.dtype != b.dtype || a.tag != b.tag ||
      a.shape != b.shape || a.inputs.size() != b.inputs.size())
    return false;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i] != b.inputs[i]) return false;
  return a.attrs == b.attrs;
}

NodePtr with_inputs(const NodePtr& n, std::vector<NodePtr> inputs) {
  LocScope scope(n->loc);
  return make_node(n->op, n->dtype, n->shape, std::move(inputs), n->attrs, n->tag);
}

std::vector<NodePtr> Graph::topo_order() const {
  std::vector<NodePtr> order;
  std::unordered_set<const Node*> seen;
  // Iterative post-order DFS (graphs can be deep).
  std::vector<std::pair<NodePtr, size_t>> stack;
  auto visit = [&](const NodePtr& root) {
    if (seen.count(root.get())) return;
    stack.emplace_back(root, 0);
    seen.insert(root.get());
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        const NodePtr& in = node->inputs[next++];
        if (!seen.count(in.get())) {
          seen.insert(in.get());
          stack.emplace_back(in, 0);
        }
      } else {
        order.push_back(node);
        stack.pop_back();
      }
    }
  };
  for (const NodePtr& in : inputs) visit(in);
  for (const NodePtr& out : outputs) visit(out);
  return order;
}

uint64_t Graph::structural_hash() const {
  Hasher h;
  h.add(inputs.size());
  for (const NodePtr& n : inputs) h.add(n->hash);
  h.add(outputs.size());
  for (const NodePtr& n : outputs) h.add(n->hash);
  return h.digest();
}

LocScope::LocScope(std::string loc) : saved_(std::move(tls_loc)) { tls_loc = std::move(loc); }
LocScope::~LocScope() { tls_loc = std::move(saved_); }
const std::string& current_loc() { return tls_loc; }
void set_current_loc(std::string loc) { tls_loc = std::move(loc); }

}  // namespace kiln::ir

namespace kiln::ir {

uint64_t Graph::shape_free_hash() const {
  std::vector<NodePtr> order = topo_order();
  std::unordered_map<const Node*, uint64_t> index;
  Hasher h;
  h.add(inputs.size());
  for (const NodePtr& n : order) {
    index.emplace(n.get(), index.size());
    h.add(n->op);
    h.add(n->dtype);
    h.add(n->tag);
    h.add(n->shape.size());
    h.add(n->inputs.size());
    for (const NodePtr& in : n->inputs) h.add(index.at(in.get()));
    add_attrs(h, n->op, n->attrs);
  }
  h.add(outputs.size());
  for (const NodePtr& n : outputs) h.add(index.at(n.get()));
  return h.digest();
}

}  // namespace kiln::ir
