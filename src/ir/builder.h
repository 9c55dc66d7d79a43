// Node factories: shape inference and dtype rules (numpy's), with typed errors naming the op,
// the operands and their shapes/dtypes. Binary ops broadcast by inserting Expand nodes.
#pragma once

#include "ir/node.h"

#include <optional>

namespace kiln::ir {

NodePtr make_input(int64_t arg, DType dtype, Shape shape);
NodePtr make_constant(DType dtype, Shape shape, std::vector<uint8_t> bytes);
NodePtr make_scalar(double value, DType dtype);
// A scalar constant broadcast to `like`'s shape.
NodePtr make_full_like(double value, const NodePtr& like);

// numpy's promotion of two dtypes (same-dtype pairs keep their dtype).
DType promote(DType a, DType b);
// The dtype a float-valued unary op gives for this input (numpy: i8->f16, i32/i64->f64, bool->f16).
DType float_result_dtype(DType in);

NodePtr make_unary(Op op, NodePtr x);
NodePtr make_binary(Op op, NodePtr a, NodePtr b);
NodePtr make_where(NodePtr cond, NodePtr a, NodePtr b);
NodePtr make_cast(NodePtr x, DType dtype);
NodePtr make_expand(NodePtr x, Shape shape);
NodePtr make_reshape(NodePtr x, Shape shape);
NodePtr make_permute(NodePtr x, std::vector<int64_t> perm);
NodePtr make_slice(NodePtr x, std::vector<int64_t> starts, std::vector<int64_t> steps, Shape shape);
// axes may be negative or unsorted; keepdims=false drops them with a Reshape.
NodePtr make_reduce(Op op, NodePtr x, std::vector<int64_t> axes, bool keepdims);
NodePtr make_matmul(NodePtr a, NodePtr b);
NodePtr make_conv2d(NodePtr x, NodePtr w, const Conv2dParams& p);
NodePtr make_concat(std::vector<NodePtr> xs, int64_t axis);
// Same node with a composite tag.
NodePtr tag_composite(NodePtr n, Composite c);

// Normalizes a possibly negative axis against ndim; throws ShapeError naming `what`.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* what);

}  // namespace kiln::ir
