// Node factories: numpy's shape and dtype rules, with typed errors at trace time.
#include "ir/builder.h"

#include "ir/interpreter.h"
#include "support/check.h"

#include <kiln/errors.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <xxhash.h>

namespace kiln::ir {

namespace {

std::string where_str() {
  const std::string& loc = current_loc();
  return loc.empty() ? std::string() : " (at " + loc + ")";
}

[[noreturn]] void shape_error(const std::string& msg) { throw ShapeError(msg + where_str()); }
[[noreturn]] void dtype_error(const std::string& msg) { throw DTypeError(msg + where_str()); }

std::string dt(DType t) { return std::string(dtype_name(t)); }

int dtype_rank_int(DType t) {
  switch (t) {
    case DType::boolean:
      return 0;
    case DType::i8:
      return 1;
    case DType::i32:
      return 2;
    case DType::i64:
      return 3;
    default:
      return -1;
  }
}

int dtype_rank_float(DType t) {
  switch (t) {
    case DType::f16:
      return 1;
    case DType::bf16:
      return 1;
    case DType::f32:
      return 2;
    case DType::f64:
      return 3;
    default:
      return -1;
  }
}

NodePtr cast_to(const NodePtr& x, DType t) { return x->dtype == t ? x : make_cast(x, t); }

void check_same_shape_or_broadcast(const char* op, NodePtr& a, NodePtr& b) {
  if (a->shape == b->shape) return;
  Shape out;
  if (!broadcast_shapes(a->shape, b->shape, out))
    shape_error(std::string(op) + ": operands with shapes " + shape_str(a->shape) + " and " +
                shape_str(b->shape) + " do not broadcast");
  a = make_expand(a, out);
  b = make_expand(b, out);
}

}  // namespace

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* what) {
  if (axis < -ndim || axis >= ndim || (ndim == 0))
    shape_error(std::string(what) + ": axis " + std::to_string(axis) +
                " is out of bounds for a tensor of " + std::to_string(ndim) + " dims");
  return axis < 0 ? axis + ndim : axis;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  int ia = dtype_rank_int(a), ib = dtype_rank_int(b);
  int fa = dtype_rank_float(a), fb = dtype_rank_float(b);
  if (ia >= 0 && ib >= 0) return ia > ib ? a : b;
  if (fa >= 0 && fb >= 0) {
    if (fa == fb) return DType::f32;  // f16 with bf16
    return fa > fb ? a : b;
  }
  // One integer, one float (numpy: small ints fit the float, wide ints need float64).
  DType f = fa >= 0 ? a : b;
  DType i = fa >= 0 ? b : a;
  if (f == DType::f64) return f;
  if (i == DType::i8) return f;
  return DType::f64;
}

DType float_result_dtype(DType in) {
  switch (in) {
    case DType::boolean:
    case DType::i8:
      return DType::f16;
    case DType::i32:
    case DType::i64:
      return DType::f64;
    default:
      return in;
  }
}

NodePtr make_input(int64_t arg, DType dtype, Shape shape) {
  Attrs a;
  a.arg = arg;
  return make_node(Op::Input, dtype, std::move(shape), {}, std::move(a));
}

NodePtr make_constant(DType dtype, Shape shape, std::vector<uint8_t> bytes) {
  KILN_CHECK(is_concrete(shape));
  KILN_CHECK(static_cast<int64_t>(bytes.size()) ==
             numel(shape) * static_cast<int64_t>(dtype_size(dtype)))
      << "constant of shape " << shape_str(shape) << " needs " << numel(shape) << " elements";
  auto data = std::make_shared<ConstantData>();
  data->hash = XXH3_64bits(bytes.data(), bytes.size());
  data->bytes = std::move(bytes);
  Attrs a;
  a.data = std::move(data);
  return make_node(Op::Constant, dtype, std::move(shape), {}, std::move(a));
}

NodePtr make_scalar(double value, DType dtype) {
  std::vector<uint8_t> bytes(dtype_size(dtype));
  encode_element(dtype, value, bytes.data());
  return make_constant(dtype, {}, std::move(bytes));
}

NodePtr make_full_like(double value, const NodePtr& like) {
  return make_expand(make_scalar(value, like->dtype), like->shape);
}

NodePtr make_unary(Op op, NodePtr x) {
  KILN_CHECK(op_kind(op) == OpKind::unary);
  DType t = x->dtype;
  switch (op) {
    case Op::Exp:
    case Op::Log:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Erf: {
      DType f = float_result_dtype(t);
      x = cast_to(x, f);
      return make_node(op, f, x->shape, {x});
    }
    case Op::Neg:
      if (t == DType::boolean)
        dtype_error("neg: a bool tensor cannot be negated (use logical_not)");
      return make_node(op, t, x->shape, {x});
    case Op::Relu:
      if (t == DType::boolean) dtype_error("relu: expected a numeric tensor, got bool");
      return make_node(op, t, x->shape, {x});
    case Op::Not:
      if (t != DType::boolean) x = make_cast(x, DType::boolean);
      return make_node(op, DType::boolean, x->shape, {x});
    case Op::Abs:
    case Op::Square:
      return make_node(op, t, x->shape, {x});
    default:
      break;
  }
  KILN_CHECK(false) << "unhandled unary op " << op_name(op);
  return nullptr;
}

NodePtr make_binary(Op op, NodePtr a, NodePtr b) {
  KILN_CHECK(op_kind(op) == OpKind::binary);
  const char* name = op_name(op).data();
  check_same_shape_or_broadcast(name, a, b);
  DType t = promote(a->dtype, b->dtype);
  if (op == Op::And || op == Op::Or) {
    a = cast_to(a, DType::boolean);
    b = cast_to(b, DType::boolean);
    return make_node(op, DType::boolean, a->shape, {a, b});
  }
  if (t == DType::boolean) {
    if (op == Op::Add || op == Op::Maximum) return make_binary(Op::Or, a, b);
    if (op == Op::Mul || op == Op::Minimum) return make_binary(Op::And, a, b);
    if (op == Op::Sub)
      dtype_error("sub: numpy does not subtract bool tensors (use logical_xor or cast first)");
    if (op == Op::Pow) t = DType::i8;
  }
  if (op == Op::Div && !is_floating(t)) t = DType::f64;  // true division
  a = cast_to(a, t);
  b = cast_to(b, t);
  DType out = is_comparison(op) ? DType::boolean : t;
  return make_node(op, out, a->shape, {a, b});
}

NodePtr make_where(NodePtr cond, NodePtr a, NodePtr b) {
  cond = cast_to(cond, DType::boolean);
  Shape ab, all;
  if (!broadcast_shapes(a->shape, b->shape, ab) || !broadcast_shapes(cond->shape, ab, all))
    shape_error("where: condition " + shape_str(cond->shape) + " and operands " +
                shape_str(a->shape) + ", " + shape_str(b->shape) + " do not broadcast");
  DType t = promote(a->dtype, b->dtype);
  cond = make_expand(cond, all);
  a = make_expand(cast_to(a, t), all);
  b = make_expand(cast_to(b, t), all);
  return make_node(Op::Where, t, all, {cond, a, b});
}

NodePtr make_cast(NodePtr x, DType dtype) {
  if (x->dtype == dtype) return x;
  return make_node(Op::Cast, dtype, x->shape, {x});
}

NodePtr make_expand(NodePtr x, Shape shape) {
  if (x->shape == shape) return x;
  const Shape& in = x->shape;
  if (in.size() > shape.size())
    shape_error("broadcast_to: cannot broadcast shape " + shape_str(in) + " to " +
                shape_str(shape));
  size_t off = shape.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    bool one = !in[i].is_symbolic() && in[i].value == 1;
    if (!one && in[i] != shape[i + off])
      shape_error("broadcast_to: cannot broadcast shape " + shape_str(in) + " to " +
                  shape_str(shape));
  }
  return make_node(Op::Expand, x->dtype, std::move(shape), {x});
}

NodePtr make_reshape(NodePtr x, Shape shape) {
  if (x->shape == shape) return x;
  check_shape_limits(Op::Reshape, x->dtype, shape);  // before same_numel multiplies its extents
  if (!same_numel(x->shape, shape)) {
    // With symbolic dims, only reshapes that keep every symbol as a dim of its own and regroup
    // the concrete dims are expressible (no symbolic products).
    if (!is_concrete(x->shape) || !is_concrete(shape))
      shape_error("reshape: cannot reshape " + shape_str(x->shape) + " to " + shape_str(shape) +
                  " with symbolic dims (a symbolic dim must stay a dim of its own)");
    shape_error("reshape: cannot reshape " + shape_str(x->shape) + " (" +
                std::to_string(numel(x->shape)) + " elements) to " + shape_str(shape));
  }
  return make_node(Op::Reshape, x->dtype, std::move(shape), {x});
}

NodePtr make_permute(NodePtr x, std::vector<int64_t> perm) {
  int64_t n = x->ndim();
  if (static_cast<int64_t>(perm.size()) != n)
    shape_error("transpose: expected a permutation of " + std::to_string(n) + " axes, got " +
                std::to_string(perm.size()));
  std::vector<bool> used(n, false);
  bool identity = true;
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = normalize_axis(perm[i], n, "transpose");
    if (used[p])
      shape_error("transpose: axis " + std::to_string(p) + " repeated in the permutation");
    used[p] = true;
    perm[i] = p;
    identity = identity && p == i;
  }
  if (identity) return x;
  Shape out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = x->shape[perm[i]];
  Attrs a;
  a.perm = std::move(perm);
  return make_node(Op::Permute, x->dtype, std::move(out), {x}, std::move(a));
}

NodePtr make_slice(NodePtr x, std::vector<int64_t> starts, std::vector<int64_t> steps,
                   Shape shape) {
  KILN_CHECK(starts.size() == x->shape.size() && steps.size() == x->shape.size() &&
             shape.size() == x->shape.size());
  bool identity = true;
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_CHECK(steps[i] != 0);
    if (x->shape[i].is_symbolic() || shape[i].is_symbolic()) {
      // A symbolic dim is sliced whole, or at one index below 2 (its guards keep it >= 2).
      bool whole = shape[i] == x->shape[i] && starts[i] == 0 && steps[i] == 1;
      bool one = is_one(shape[i]) && starts[i] >= 0 && starts[i] < 2;
      KILN_CHECK(whole || one) << "slice of symbolic dim " << i;
      identity = identity && whole;
      continue;
    }
    const int64_t ext = x->shape[i].value, n = shape[i].value;
    if (n > 0) {
      int64_t last = starts[i] + (n - 1) * steps[i];
      KILN_CHECK(starts[i] >= 0 && starts[i] < ext && last >= 0 && last < ext)
          << "slice out of range on dim " << i;
    }
    identity = identity && starts[i] == 0 && steps[i] == 1 && n == ext;
  }
  if (identity) return x;
  Attrs a;
  a.starts = std::move(starts);
  a.steps = std::move(steps);
  return make_node(Op::Slice, x->dtype, std::move(shape), {x}, std::move(a));
}

NodePtr make_reduce(Op op, NodePtr x, std::vector<int64_t> axes, bool keepdims) {
  KILN_CHECK(is_reduce(op));
  const char* name = op_name(op).data();
  int64_t n = x->ndim();
  for (auto& ax : axes) ax = normalize_axis(ax, n, name);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    shape_error(std::string(name) + ": duplicate axis in the reduction");
  DType t = x->dtype;
  DType out_t = t;
  if (op == Op::ReduceSum && (t == DType::boolean || t == DType::i8 || t == DType::i32))
    out_t = DType::i64;
  if (op == Op::ReduceMean && !is_floating(t)) out_t = DType::f64;
  for (int64_t ax : axes)
    if ((op == Op::ReduceMax || op == Op::ReduceMin) && !x->shape[ax].is_symbolic() &&
        x->shape[ax].value == 0)
      shape_error(std::string(name) + ": zero-size axis " + std::to_string(ax) + " of shape " +
                  shape_str(x->shape) + " has no identity");
  if (axes.empty()) return cast_to(x, out_t);
  x = cast_to(x, out_t);
  Shape kept = x->shape;
  for (int64_t ax : axes) kept[ax] = Dim::concrete(1);
  Attrs a;
  a.axes = axes;
  NodePtr r = make_node(op, out_t, kept, {x}, std::move(a));
  if (keepdims) return r;
  Shape dropped;
  for (int64_t i = 0; i < n; ++i)
    if (!std::binary_search(axes.begin(), axes.end(), i)) dropped.push_back(x->shape[i]);
  return make_reshape(r, dropped);
}

NodePtr make_matmul(NodePtr a, NodePtr b) {
  if (a->ndim() == 0 || b->ndim() == 0)
    shape_error("matmul: operands must have at least 1 dim, got shapes " + shape_str(a->shape) +
                " and " + shape_str(b->shape));
  if (a->dtype == DType::boolean || b->dtype == DType::boolean)
    dtype_error("matmul: bool operands are not supported, got " + dt(a->dtype) + " and " +
                dt(b->dtype));
  DType t = promote(a->dtype, b->dtype);
  a = cast_to(a, t);
  b = cast_to(b, t);
  bool a_vec = a->ndim() == 1, b_vec = b->ndim() == 1;
  if (a_vec) a = make_reshape(a, {Dim::concrete(1), a->shape[0]});
  if (b_vec) b = make_reshape(b, {b->shape[0], Dim::concrete(1)});
  Dim k_a = a->shape[a->ndim() - 1], k_b = b->shape[b->ndim() - 2];
  if (k_a != k_b)
    shape_error("matmul: contraction dims differ: a has K=" +
                shape_str({k_a}).substr(1, shape_str({k_a}).size() - 2) + " (shape " +
                shape_str(a->shape) +
                "), b has K=" + shape_str({k_b}).substr(1, shape_str({k_b}).size() - 2) +
                " (shape " + shape_str(b->shape) + ")");
  Shape ba(a->shape.begin(), a->shape.end() - 2), bb(b->shape.begin(), b->shape.end() - 2), batch;
  if (!broadcast_shapes(ba, bb, batch))
    shape_error("matmul: batch dims " + shape_str(ba) + " and " + shape_str(bb) +
                " do not broadcast");
  Shape sa = batch, sb = batch, so = batch;
  sa.push_back(a->shape[a->ndim() - 2]);
  sa.push_back(k_a);
  sb.push_back(k_b);
  sb.push_back(b->shape[b->ndim() - 1]);
  so.push_back(a->shape[a->ndim() - 2]);
  so.push_back(b->shape[b->ndim() - 1]);
  a = make_expand(a, sa);
  b = make_expand(b, sb);
  NodePtr r = make_node(Op::MatMul, t, so, {a, b});
  if (a_vec || b_vec) {
    Shape final_shape = batch;
    if (!a_vec) final_shape.push_back(so[so.size() - 2]);
    if (!b_vec) final_shape.push_back(so[so.size() - 1]);
    r = make_reshape(r, final_shape);
  }
  return r;
}

NodePtr make_conv2d(NodePtr x, NodePtr w, const Conv2dParams& p) {
  if (x->ndim() != 4 || w->ndim() != 4)
    shape_error("conv2d: expected x [N,C,H,W] and w [O,C/groups,KH,KW], got shapes " +
                shape_str(x->shape) + " and " + shape_str(w->shape));
  if (x->dtype == DType::boolean || w->dtype == DType::boolean)
    dtype_error("conv2d: bool operands are not supported");
  DType t = promote(x->dtype, w->dtype);
  x = cast_to(x, t);
  w = cast_to(w, t);
  for (int i = 1; i < 4; ++i)
    if (x->shape[i].is_symbolic() || w->shape[i].is_symbolic() || w->shape[0].is_symbolic())
      shape_error("conv2d: only the batch dim may be symbolic, got x " + shape_str(x->shape) +
                  " and w " + shape_str(w->shape));
  auto xs = concrete_dims(x->shape), ws = concrete_dims(w->shape);
  int64_t g = p.groups;
  if (g < 1) shape_error("conv2d: groups must be >= 1, got " + std::to_string(g));
  for (int i = 0; i < 2; ++i) {
    if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padding[i] < 0)
      shape_error("conv2d: stride and dilation must be >= 1 and padding >= 0");
  }
  if (xs[1] != ws[1] * g)
    shape_error("conv2d: x has " + std::to_string(xs[1]) + " channels but w expects " +
                std::to_string(ws[1]) + " x groups(" + std::to_string(g) + ")");
  if (ws[0] % g != 0)
    shape_error("conv2d: output channels " + std::to_string(ws[0]) + " not divisible by groups " +
                std::to_string(g));
  // Output extents, the padded input and the dilated kernel checked against int64 overflow.
  int64_t out_hw[2];
  for (int i = 0; i < 2; ++i) {
    int64_t padded = 0, span = 0;
    if (__builtin_mul_overflow(p.padding[i], int64_t(2), &padded) ||
        __builtin_add_overflow(padded, xs[2 + i], &padded) ||
        __builtin_mul_overflow(p.dilation[i], ws[2 + i] - 1, &span) ||
        __builtin_add_overflow(span, int64_t(1), &span))
      shape_error("conv2d: padding " + std::to_string(p.padding[i]) + " or dilation " +
                  std::to_string(p.dilation[i]) + " makes the padded input or the kernel's span " +
                  "overflow 64 bits");
    if (padded < span)
      shape_error("conv2d: kernel " + shape_str(w->shape) + " is larger than the padded input " +
                  shape_str(x->shape));
    out_hw[i] = (padded - span) / p.stride[i] + 1;
  }
  const int64_t oh = out_hw[0], ow = out_hw[1];
  Attrs a;
  a.conv = p;
  return make_node(Op::Conv2d, t,
                   Shape{x->shape[0], w->shape[0], Dim::concrete(oh), Dim::concrete(ow)}, {x, w},
                   std::move(a));
}

NodePtr make_concat(std::vector<NodePtr> xs, int64_t axis) {
  if (xs.empty()) shape_error("concatenate: needs at least one tensor");
  int64_t n = xs[0]->ndim();
  axis = normalize_axis(axis, n, "concatenate");
  DType t = xs[0]->dtype;
  for (const auto& x : xs) t = promote(t, x->dtype);
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i]->ndim() != n)
      shape_error("concatenate: tensor " + std::to_string(i) + " has shape " +
                  shape_str(xs[i]->shape) + ", expected " + std::to_string(n) + " dims");
    for (int64_t d = 0; d < n; ++d)
      if (d != axis && xs[i]->shape[d] != xs[0]->shape[d])
        shape_error("concatenate: tensor " + std::to_string(i) + " has shape " +
                    shape_str(xs[i]->shape) + ", which differs from " + shape_str(xs[0]->shape) +
                    " outside axis " + std::to_string(axis));
    if (xs[i]->shape[axis].is_symbolic())
      shape_error("concatenate: a symbolic extent along the concatenation axis is not supported");
    if (__builtin_add_overflow(total, xs[i]->shape[axis].value, &total))
      shape_error("concatenate: the pieces' extents along axis " + std::to_string(axis) +
                  " add past 2^63 - 1");
    xs[i] = cast_to(xs[i], t);
  }
  if (xs.size() == 1) return xs[0];
  Shape out = xs[0]->shape;
  out[axis] = Dim::concrete(total);
  Attrs a;
  a.axis = axis;
  return make_node(Op::Concat, t, std::move(out), std::move(xs), std::move(a));
}

NodePtr tag_composite(NodePtr n, Composite c) {
  LocScope scope(n->loc);
  return make_node(n->op, n->dtype, n->shape, n->inputs, n->attrs, c);
}

}  // namespace kiln::ir
