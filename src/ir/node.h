// The IR node: immutable, structurally hashed, created only through the factories in builder.h
// (which check shapes and dtypes). A graph is a DAG of shared nodes.
//
// Op semantics (all shapes concrete or symbolic; binary/ternary operands already have EQUAL shapes,
// the factories insert Expand nodes for numpy broadcasting):
//   Input     attrs.arg: argument position.            Constant  attrs.data: bytes in `dtype`,
//   row-major. unary     same shape; dtype per numpy (float results for int inputs of exp/log/...).
//   binary    operands of equal shape and dtype (after promotion); comparisons give bool.
//             Div on integers is not built (true division promotes to float first).
//   Where     inputs (cond: bool, a, b), equal shapes, a and b same dtype.
//   Cast      input converted to `dtype` (float->int truncates toward zero; ->bool is x != 0).
//   Expand    input broadcast to `shape` (input right-aligned; its dims are 1 or equal).
//   Reshape   same numel, row-major order.
//   Permute   attrs.perm: output dim i is input dim perm[i].
//   Slice     attrs.starts, attrs.steps per input dim: out[i] = in[starts + i*steps] (steps may be
//             negative, never 0); the output extents are `shape`.
//   Reduce*   attrs.axes (sorted, unique); the output keeps the reduced dims as 1 (keepdims form).
//             Mean of integers gives float64; Sum of i8/i32/bool gives i64 (numpy).
//   MatMul    inputs A [..., M, K], B [..., K, N] with equal batch dims -> [..., M, N].
//   Conv2d    x [N, C, H, W], w [O, C/groups, KH, KW] -> [N, O, OH, OW]; attrs.conv.
//   Concat    attrs.axis; inputs equal except along axis.
#pragma once

#include "ir/op.h"
#include "ir/shape.h"

#include <kiln/dtype.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::ir {

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct ConstantData {
  std::vector<uint8_t> bytes;  // row-major, in the node's dtype
  uint64_t hash = 0;           // of the bytes
};

struct Attrs {
  int64_t arg = 0;                           // Input
  int64_t axis = 0;                          // Concat
  std::vector<int64_t> perm;                 // Permute
  std::vector<int64_t> axes;                 // Reduce*
  std::vector<int64_t> starts;               // Slice
  std::vector<int64_t> steps;                // Slice
  Conv2dParams conv;                         // Conv2d
  std::shared_ptr<const ConstantData> data;  // Constant

  bool operator==(const Attrs& o) const;
};

struct Node {
  Op op;
  DType dtype;
  Shape shape;
  std::vector<NodePtr> inputs;
  Attrs attrs;
  Composite tag = Composite::none;
  uint64_t hash = 0;  // structural: op, dtype, shape, attrs, tag and the inputs' hashes
  std::string loc;    // where it was traced from ("file:line"), not part of the hash

  ~Node();
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  // For a Constant: element i as double (any dtype).
  double constant_at(int64_t i) const;
  // For a Constant of an integer or bool dtype: element i exactly (int64 past 2^53 included).
  int64_t constant_int_at(int64_t i) const;
  bool is_scalar_constant() const { return op == Op::Constant && shape.empty(); }
};

// The one place nodes are created; computes the hash. Factories in builder.h call it after
// checking.
// A ShapeError unless `shape` is one numpy could hold: at most kMaxDims dims, and its concrete
// extents' product, in bytes too, within int64 (zero extents left out, so [0, 2^40, 2^40] is
// refused as numpy refuses it). make_node checks every node; a builder that multiplies extents
// itself (reshape's element count) checks first: an overflowed count passed reshape's check and
// sent kernels past their buffers.
void check_shape_limits(Op op, DType dtype, const Shape& shape);

NodePtr make_node(Op op, DType dtype, Shape shape, std::vector<NodePtr> inputs, Attrs attrs = {},
                  Composite tag = Composite::none);
// Same op/dtype/shape/attrs/tag and pointer-identical inputs.
bool shallow_equal(const Node& a, const Node& b);
// A copy of `n` with other inputs (shape and dtype unchanged).
NodePtr with_inputs(const NodePtr& n, std::vector<NodePtr> inputs);

// A traced program: Input nodes in argument order, and the outputs.
struct Graph {
  std::vector<NodePtr> inputs;
  std::vector<NodePtr> outputs;

  // Every node reachable from the outputs, inputs before users.
  std::vector<NodePtr> topo_order() const;
  uint64_t structural_hash() const;
  // The program without its extents: ops, dtypes, ranks, attributes and constants (what stays
  // the same when the same function is traced at other shapes).
  uint64_t shape_free_hash() const;
};

// The source location recorded on nodes created on this thread (set by the tracing front ends).
class LocScope {
 public:
  explicit LocScope(std::string loc);
  ~LocScope();
  LocScope(const LocScope&) = delete;
  LocScope& operator=(const LocScope&) = delete;

 private:
  std::string saved_;
};
const std::string& current_loc();
void set_current_loc(std::string loc);

}  // namespace kiln::ir
