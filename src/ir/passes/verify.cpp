// The IR verifier: re-checks, node by node, the invariants that the factories in builder.h
// establish (node.h's op semantics), so that a pass that builds a bad node is caught right after it
// runs instead of miscompiling later. Errors are kiln::CompileError naming the node's printed line.
#include "ir/passes/passes.h"

#include <kiln/errors.h>

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace kiln::ir {

namespace {

struct Violation {
  std::string what;
};

[[noreturn]] void fail(std::string what) { throw Violation{std::move(what)}; }

std::string dt(DType t) { return std::string(dtype_name(t)); }

void expect_inputs(const Node& n, size_t count) {
  if (n.inputs.size() != count)
    fail(fmt::format("{} takes {} input(s), has {}", op_name(n.op), count, n.inputs.size()));
}

void expect_same_shape(const Node& n, const Node& in, const char* what) {
  if (in.shape != n.shape)
    fail(fmt::format("{} has shape {}, expected the node's shape {}", what, shape_str(in.shape),
                     shape_str(n.shape)));
}

void expect_same_dtype(const Node& n, const Node& in, const char* what) {
  if (in.dtype != n.dtype)
    fail(fmt::format("{} has dtype {}, expected the node's dtype {}", what, dt(in.dtype),
                     dt(n.dtype)));
}

void check_leaf(const Graph& g, const Node& n) {
  expect_inputs(n, 0);
  if (n.op == Op::Input) {
    const int64_t arg = n.attrs.arg;
    if (arg < 0 || arg >= static_cast<int64_t>(g.inputs.size()))
      fail(fmt::format("input arg {} is out of range for a graph of {} inputs", arg,
                       g.inputs.size()));
    if (g.inputs[arg].get() != &n)
      fail(fmt::format("input arg {} is not the graph's input {}", arg, arg));
    return;
  }
  // Constant
  if (!n.attrs.data) fail("constant has no data");
  if (!is_concrete(n.shape)) fail("constant has a symbolic shape");
  const size_t want = static_cast<size_t>(numel(n.shape)) * dtype_size(n.dtype);
  if (n.attrs.data->bytes.size() != want)
    fail(fmt::format("constant holds {} bytes, its shape {} in {} needs {}",
                     n.attrs.data->bytes.size(), shape_str(n.shape), dt(n.dtype), want));
}

void check_unary(const Node& n) {
  expect_inputs(n, 1);
  const Node& x = *n.inputs[0];
  expect_same_shape(n, x, "operand");
  expect_same_dtype(n, x, "operand");
  switch (n.op) {
    case Op::Not:
      if (n.dtype != DType::boolean) fail("logical_not needs a bool operand, got " + dt(n.dtype));
      break;
    case Op::Exp:
    case Op::Log:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Erf:
      if (!is_floating(n.dtype)) fail("needs a floating operand, got " + dt(n.dtype));
      break;
    case Op::Neg:
    case Op::Relu:
      if (n.dtype == DType::boolean) fail("needs a numeric operand, got bool");
      break;
    default:
      break;
  }
}

void check_binary(const Node& n) {
  expect_inputs(n, 2);
  const Node& a = *n.inputs[0];
  const Node& b = *n.inputs[1];
  expect_same_shape(n, a, "lhs");
  expect_same_shape(n, b, "rhs");
  if (a.dtype != b.dtype)
    fail(fmt::format("operand dtypes differ: {} and {}", dt(a.dtype), dt(b.dtype)));
  if (is_comparison(n.op)) {
    if (n.dtype != DType::boolean) fail("a comparison gives bool, node has " + dt(n.dtype));
    return;
  }
  expect_same_dtype(n, a, "lhs");
  if (n.op == Op::And || n.op == Op::Or) {
    if (n.dtype != DType::boolean) fail("needs bool operands, got " + dt(n.dtype));
    return;
  }
  if (n.dtype == DType::boolean) fail("arithmetic on bool operands is not built");
  if (n.op == Op::Div && !is_floating(n.dtype))
    fail("div needs floating operands (true division), got " + dt(n.dtype));
}

void check_where(const Node& n) {
  expect_inputs(n, 3);
  const Node& c = *n.inputs[0];
  expect_same_shape(n, c, "condition");
  expect_same_shape(n, *n.inputs[1], "first branch");
  expect_same_shape(n, *n.inputs[2], "second branch");
  if (c.dtype != DType::boolean) fail("condition must be bool, got " + dt(c.dtype));
  expect_same_dtype(n, *n.inputs[1], "first branch");
  expect_same_dtype(n, *n.inputs[2], "second branch");
}

void check_expand(const Node& n) {
  const Shape& in = n.inputs[0]->shape;
  const Shape& out = n.shape;
  bool ok = in.size() <= out.size();
  const size_t off = ok ? out.size() - in.size() : 0;
  for (size_t i = 0; ok && i < in.size(); ++i) ok = is_one(in[i]) || in[i] == out[i + off];
  if (!ok) fail("cannot broadcast the operand's shape " + shape_str(in) + " to " + shape_str(out));
}

void check_reshape(const Node& n) {
  const Shape& in = n.inputs[0]->shape;
  if (same_numel(in, n.shape)) return;
  if (!is_concrete(in) || !is_concrete(n.shape))
    fail("reshape of symbolic shapes must keep the symbols and the other dims' product, got " +
         shape_str(in) + " to " + shape_str(n.shape));
  fail(fmt::format("reshape changes the element count: {} ({}) to {} ({})", shape_str(in),
                   numel(in), shape_str(n.shape), numel(n.shape)));
}

void check_permute(const Node& n) {
  const Shape& in = n.inputs[0]->shape;
  const auto& perm = n.attrs.perm;
  const int64_t rank = static_cast<int64_t>(in.size());
  if (static_cast<int64_t>(perm.size()) != rank || n.ndim() != rank)
    fail(fmt::format("perm {} for an operand of {} dims and a result of {}", dims_text(perm), rank,
                     n.ndim()));
  std::vector<bool> used(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || used[p]) fail("perm " + dims_text(perm) + " is not a permutation");
    used[p] = true;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (n.shape[i] != in[perm[i]])
      fail(fmt::format("result shape {} is not the operand's {} permuted by {}", shape_str(n.shape),
                       shape_str(in), dims_text(perm)));
}

void check_slice(const Node& n) {
  const Shape& in = n.inputs[0]->shape;
  const Attrs& a = n.attrs;
  const size_t rank = in.size();
  if (a.starts.size() != rank || a.steps.size() != rank || n.shape.size() != rank)
    fail(fmt::format("starts {} and steps {} for an operand of {} dims and a result of {}",
                     dims_text(a.starts), dims_text(a.steps), rank, n.ndim()));
  for (size_t i = 0; i < rank; ++i) {
    if (a.steps[i] == 0) fail(fmt::format("step 0 on dim {}", i));
    if (in[i].is_symbolic() || n.shape[i].is_symbolic()) continue;
    const int64_t ext = in[i].value, count = n.shape[i].value;
    if (count < 0) fail(fmt::format("negative extent on dim {}", i));
    if (count == 0) continue;
    const int64_t last = a.starts[i] + (count - 1) * a.steps[i];
    if (a.starts[i] < 0 || a.starts[i] >= ext || last < 0 || last >= ext)
      fail(fmt::format("dim {} reads [{}, {}] with step {}, outside the operand's extent {}", i,
                       a.starts[i], last, a.steps[i], ext));
  }
}

void check_reduce(const Node& n) {
  expect_inputs(n, 1);
  const Node& x = *n.inputs[0];
  expect_same_dtype(n, x, "operand");
  const auto& axes = n.attrs.axes;
  const int64_t rank = x.ndim();
  if (axes.empty()) fail("reduction over no axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      fail(fmt::format("axes {} out of range for {} dims", dims_text(axes), rank));
    if (i && axes[i] <= axes[i - 1]) fail("axes " + dims_text(axes) + " are not sorted and unique");
  }
  Shape kept = x.shape;
  for (int64_t ax : axes) kept[ax] = Dim::concrete(1);
  if (n.shape != kept)
    fail(fmt::format("keepdims result of {} over axes {} is {}, node has {}", shape_str(x.shape),
                     dims_text(axes), shape_str(kept), shape_str(n.shape)));
  if (n.op == Op::ReduceMean && !is_floating(n.dtype))
    fail("mean accumulates in a floating dtype, got " + dt(n.dtype));
  if (n.op == Op::ReduceSum &&
      (n.dtype == DType::boolean || n.dtype == DType::i8 || n.dtype == DType::i32))
    fail("sum of " + dt(n.dtype) + " is built in int64");
  if (n.op == Op::ReduceMax || n.op == Op::ReduceMin)
    for (int64_t ax : axes)
      if (!x.shape[ax].is_symbolic() && x.shape[ax].value == 0)
        fail(fmt::format("zero-size axis {} has no identity", ax));
}

void check_matmul(const Node& n) {
  expect_inputs(n, 2);
  const Node& a = *n.inputs[0];
  const Node& b = *n.inputs[1];
  if (a.ndim() < 2 || a.ndim() != b.ndim() || n.ndim() != a.ndim())
    fail(fmt::format("operands {} and {} and result {} need the same rank >= 2", shape_str(a.shape),
                     shape_str(b.shape), shape_str(n.shape)));
  expect_same_dtype(n, a, "lhs");
  expect_same_dtype(n, b, "rhs");
  if (n.dtype == DType::boolean) fail("bool matmul is not built");
  const int64_t r = a.ndim();
  Shape want(a.shape.begin(), a.shape.end() - 2);
  if (Shape(b.shape.begin(), b.shape.end() - 2) != want)
    fail("batch dims differ: " + shape_str(a.shape) + " and " + shape_str(b.shape));
  if (a.shape[r - 1] != b.shape[r - 2])
    fail("contraction dims differ: " + shape_str(a.shape) + " and " + shape_str(b.shape));
  want.push_back(a.shape[r - 2]);
  want.push_back(b.shape[r - 1]);
  if (n.shape != want) fail("result shape " + shape_str(n.shape) + ", expected " + shape_str(want));
}

void check_conv2d(const Node& n) {
  expect_inputs(n, 2);
  const Node& x = *n.inputs[0];
  const Node& w = *n.inputs[1];
  if (x.ndim() != 4 || w.ndim() != 4 || n.ndim() != 4)
    fail("needs x [N,C,H,W], w [O,C/groups,KH,KW], got " + shape_str(x.shape) + " and " +
         shape_str(w.shape));
  for (int i = 1; i < 4; ++i)
    if (x.shape[i].is_symbolic() || w.shape[i].is_symbolic() || n.shape[i].is_symbolic())
      fail("only the batch dim may be symbolic");
  if (w.shape[0].is_symbolic() || x.shape[0] != n.shape[0]) fail("batch dims differ");
  expect_same_dtype(n, x, "x");
  expect_same_dtype(n, w, "w");
  if (n.dtype == DType::boolean) fail("bool conv2d is not built");
  const Conv2dParams& p = n.attrs.conv;
  const auto xs = concrete_dims(x.shape), ws = concrete_dims(w.shape);
  if (p.groups < 1) fail(fmt::format("groups {} < 1", p.groups));
  for (int i = 0; i < 2; ++i)
    if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padding[i] < 0)
      fail("stride and dilation must be >= 1 and padding >= 0");
  if (xs[1] != ws[1] * p.groups || ws[0] % p.groups != 0)
    fail(fmt::format("channels: x has {}, w {} x groups {}, output {}", xs[1], ws[1], p.groups,
                     ws[0]));
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t span = p.dilation[i] * (ws[2 + i] - 1) + 1;
    if (xs[2 + i] + 2 * p.padding[i] < span) fail("kernel larger than the padded input");
    out[i] = (xs[2 + i] + 2 * p.padding[i] - span) / p.stride[i] + 1;
  }
  const Shape want = {x.shape[0], Dim::concrete(ws[0]), Dim::concrete(out[0]),
                      Dim::concrete(out[1])};
  if (n.shape != want) fail("result shape " + shape_str(n.shape) + ", expected " + shape_str(want));
}

void check_concat(const Node& n) {
  if (n.inputs.empty()) fail("concat of no inputs");
  const int64_t rank = n.ndim();
  const int64_t axis = n.attrs.axis;
  if (axis < 0 || axis >= rank) fail(fmt::format("axis {} out of range for {} dims", axis, rank));
  int64_t total = 0;
  bool concrete_axis = true;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Node& x = *n.inputs[i];
    expect_same_dtype(n, x, "an operand");
    if (x.ndim() != rank)
      fail(fmt::format("operand {} has shape {}, expected {} dims", i, shape_str(x.shape), rank));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && x.shape[d] != n.shape[d])
        fail(
            fmt::format("operand {} has shape {}, which differs from the result {} outside axis {}",
                        i, shape_str(x.shape), shape_str(n.shape), axis));
    concrete_axis = concrete_axis && !x.shape[axis].is_symbolic();
    total += x.shape[axis].value;
  }
  if (concrete_axis && n.shape[axis] != Dim::concrete(total))
    fail(fmt::format("result extent {} along axis {}, the operands sum to {}",
                     shape_str({n.shape[axis]}), axis, total));
}

void check_node(const Graph& g, const Node& n) {
  for (const Dim& d : n.shape)
    if (!d.is_symbolic() && d.value < 0) fail("negative extent in shape " + shape_str(n.shape));
  for (const NodePtr& in : n.inputs)
    if (!in) fail("null input");
  switch (op_kind(n.op)) {
    case OpKind::leaf:
      return check_leaf(g, n);
    case OpKind::unary:
      return check_unary(n);
    case OpKind::binary:
      return check_binary(n);
    case OpKind::ternary:
      return check_where(n);
    case OpKind::cast:
      expect_inputs(n, 1);
      return expect_same_shape(n, *n.inputs[0], "operand");
    case OpKind::view:
      expect_inputs(n, 1);
      expect_same_dtype(n, *n.inputs[0], "operand");
      switch (n.op) {
        case Op::Expand:
          return check_expand(n);
        case Op::Reshape:
          return check_reshape(n);
        case Op::Permute:
          return check_permute(n);
        case Op::Slice:
          return check_slice(n);
        default:
          break;
      }
      break;
    case OpKind::reduce:
      return check_reduce(n);
    case OpKind::contraction:
      return n.op == Op::MatMul ? check_matmul(n) : check_conv2d(n);
    case OpKind::concat:
      return check_concat(n);
  }
  fail("unknown op");
}

}  // namespace

void verify(const Graph& g) {
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const NodePtr& in = g.inputs[i];
    if (!in || in->op != Op::Input || in->attrs.arg != static_cast<int64_t>(i))
      throw CompileError(
          fmt::format("verify: graph input {} is not an Input node with arg {}", i, i));
  }
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (!g.outputs[i]) throw CompileError(fmt::format("verify: graph output {} is null", i));
  for (const NodePtr& n : g.topo_order()) {
    try {
      check_node(g, *n);
    } catch (const Violation& v) {
      std::string msg = "verify: `" + detail::print_node_line(g, *n) + "`: " + v.what;
      if (!n->loc.empty()) msg += " (traced at " + n->loc + ")";
      throw CompileError(msg);
    }
  }
}

}  // namespace kiln::ir
