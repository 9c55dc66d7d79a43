// The public kiln::Tensor API: every operation records IR nodes through the factories in
// builder.h, under the caller's source location.
#include "ir/caller_loc.h"
#include "ir/tensor_access.h"

#include <kiln/errors.h>
#include <kiln/tensor.h>

#include <cmath>
#include <cstring>
#include <string>

namespace kiln {

using ir::CallerLoc;

using ir::NodePtr;

using ir::binary;
using ir::node_of;
using ir::wrap;

namespace {

std::vector<int64_t> all_axes(int64_t n) {
  std::vector<int64_t> a(n);
  for (int64_t i = 0; i < n; ++i) a[i] = i;
  return a;
}

std::vector<int64_t> to_axes(const Axes& axes, int64_t ndim) {
  if (axes.all) return all_axes(ndim);
  return std::vector<int64_t>(axes.axes.begin(), axes.axes.end());
}

Tensor unary(ir::Op op, const Tensor& x, const Loc& loc) {
  CallerLoc l(loc);
  return wrap(ir::make_unary(op, node_of(x, ir::op_name(op).data())));
}

Tensor reduce(ir::Op op, const Tensor& x, const Axes& axes, bool keepdims, const Loc& loc) {
  CallerLoc l(loc);
  const NodePtr& n = node_of(x, ir::op_name(op).data());
  return wrap(ir::make_reduce(op, n, to_axes(axes, n->ndim()), keepdims));
}

}  // namespace

ScopedTraceLocation::ScopedTraceLocation(std::string loc) : saved_(ir::current_loc()) {
  ir::set_current_loc(std::move(loc));
}

ScopedTraceLocation::~ScopedTraceLocation() { ir::set_current_loc(std::move(saved_)); }

std::vector<int64_t> Tensor::shape() const {
  const ir::Shape& s = node_of(*this, "shape")->shape;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].is_symbolic())
      throw ShapeError("shape: dim " + std::to_string(i) + " of " + ir::shape_str(s) +
                       " is symbolic in this trace and has no extent; use symbolic_shape() to "
                       "pass it on to reshape or broadcast_to");
  return ir::concrete_dims(s);
}
std::vector<int64_t> Tensor::symbolic_shape() const {
  return ir::concrete_dims(node_of(*this, "shape")->shape);
}
std::string Tensor::shape_str() const { return ir::shape_str(node_of(*this, "shape")->shape); }
DType Tensor::dtype() const { return node_of(*this, "dtype")->dtype; }
int64_t Tensor::ndim() const { return node_of(*this, "ndim")->ndim(); }

Tensor Tensor::T(Loc loc) const { return kiln::transpose(*this, {}, loc); }
Tensor Tensor::sum(Axes axes, bool keepdims, Loc loc) const {
  return kiln::sum(*this, axes, keepdims, loc);
}
Tensor Tensor::mean(Axes axes, bool keepdims, Loc loc) const {
  return kiln::mean(*this, axes, keepdims, loc);
}
Tensor Tensor::max(Axes axes, bool keepdims, Loc loc) const {
  return kiln::max(*this, axes, keepdims, loc);
}
Tensor Tensor::min(Axes axes, bool keepdims, Loc loc) const {
  return kiln::min(*this, axes, keepdims, loc);
}
Tensor Tensor::reshape(std::vector<int64_t> shape, Loc loc) const {
  return kiln::reshape(*this, std::move(shape), loc);
}
Tensor Tensor::transpose(std::vector<int64_t> perm, Loc loc) const {
  return kiln::transpose(*this, std::move(perm), loc);
}
Tensor Tensor::astype(DType dtype, Loc loc) const { return kiln::astype(*this, dtype, loc); }
Tensor Tensor::abs(Loc loc) const { return kiln::abs(*this, loc); }

Tensor Tensor::index(const std::vector<Index>& idx, Loc loc) const {
  CallerLoc l(loc);
  NodePtr x = node_of(*this, "index");
  int64_t nd = x->ndim();
  int64_t consumed = 0, ellipses = 0;
  for (const Index& i : idx) {
    if (i.kind == Index::Kind::integer || i.kind == Index::Kind::slice) ++consumed;
    if (i.kind == Index::Kind::ellipsis) ++ellipses;
  }
  if (ellipses > 1) throw ShapeError("index: at most one ellipsis (...) is allowed");
  if (consumed > nd)
    throw ShapeError("index: too many indices (" + std::to_string(consumed) + ") for a tensor of " +
                     std::to_string(nd) + " dims");
  std::vector<Index> full;
  for (const Index& i : idx) {
    if (i.kind == Index::Kind::ellipsis) {
      for (int64_t k = 0; k < nd - consumed; ++k) full.push_back(Index::slice());
    } else {
      full.push_back(i);
    }
  }
  if (ellipses == 0)
    for (int64_t k = consumed; k < nd; ++k) full.push_back(Index::slice());
  std::vector<int64_t> starts(nd), steps(nd);
  ir::Shape sliced(nd), final_shape;
  int64_t d = 0;
  for (const Index& i : full) {
    if (i.kind == Index::Kind::new_axis) {
      final_shape.push_back(ir::Dim::concrete(1));
      continue;
    }
    if (x->shape[d].is_symbolic()) {
      // Guards keep a symbolic extent >= 2: indices 0 and 1 and the whole dim are expressible.
      bool whole = i.kind == Index::Kind::slice && i.start.value_or(0) == 0 && !i.stop &&
                   i.step.value_or(1) == 1;
      if (i.kind == Index::Kind::integer && (i.value == 0 || i.value == 1)) {
        starts[d] = i.value;
        steps[d] = 1;
        sliced[d] = ir::Dim::concrete(1);
      } else if (whole) {
        starts[d] = 0;
        steps[d] = 1;
        sliced[d] = x->shape[d];
        final_shape.push_back(sliced[d]);
      } else {
        throw ShapeError("index: axis " + std::to_string(d) + " of shape " +
                         ir::shape_str(x->shape) +
                         " is symbolic; only the whole axis or index 0 or 1 can be taken");
      }
      ++d;
      continue;
    }
    int64_t ext = x->shape[d].value;
    if (i.kind == Index::Kind::integer) {
      int64_t v = i.value < 0 ? i.value + ext : i.value;
      if (v < 0 || v >= ext)
        throw ShapeError("index: index " + std::to_string(i.value) + " is out of bounds for axis " +
                         std::to_string(d) + " with size " + std::to_string(ext));
      starts[d] = v;
      steps[d] = 1;
      sliced[d] = ir::Dim::concrete(1);
    } else {
      int64_t step = i.step.value_or(1);
      if (step == 0) throw ShapeError("index: slice step cannot be zero");
      // Python's slice.indices() semantics.
      int64_t lo, hi;
      if (step > 0) {
        lo = i.start.value_or(0);
        hi = i.stop.value_or(ext);
        if (lo < 0) lo = std::max<int64_t>(lo + ext, 0);
        if (hi < 0) hi = std::max<int64_t>(hi + ext, 0);
        lo = std::min(lo, ext);
        hi = std::min(hi, ext);
      } else {
        lo = i.start.has_value() ? *i.start : ext - 1;
        hi = i.stop.has_value() ? *i.stop : -ext - 1;
        if (lo < 0) lo = std::max<int64_t>(lo + ext, -1);
        if (hi < -1 || (i.stop.has_value() && *i.stop < 0)) hi = std::max<int64_t>(hi + ext, -1);
        lo = std::min(lo, ext - 1);
        hi = std::min(hi, ext - 1);
      }
      int64_t n = step > 0 ? (hi > lo ? (hi - lo + step - 1) / step : 0)
                           : (lo > hi ? (lo - hi + (-step) - 1) / (-step) : 0);
      starts[d] = n > 0 ? lo : 0;
      steps[d] = step;
      sliced[d] = ir::Dim::concrete(n);
      final_shape.push_back(sliced[d]);
    }
    ++d;
  }
  NodePtr r = ir::make_slice(x, starts, steps, sliced);
  return wrap(ir::make_reshape(r, final_shape));
}

Tensor constant(const void* data, std::vector<int64_t> shape, DType dtype, Loc loc) {
  CallerLoc l(loc);
  for (int64_t d : shape)
    if (d < 0) throw ShapeError("constant: negative dim in shape");
  ir::Shape s = ir::concrete_shape(shape);
  size_t bytes = static_cast<size_t>(ir::numel(s)) * dtype_size(dtype);
  std::vector<uint8_t> buf(bytes);
  if (bytes) std::memcpy(buf.data(), data, bytes);
  return wrap(ir::make_constant(dtype, std::move(s), std::move(buf)));
}

Tensor operator+(const Tensor& a, const Tensor& b) { return binary(ir::Op::Add, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(ir::Op::Sub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(ir::Op::Mul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary(ir::Op::Div, a, b); }
Tensor operator-(const Tensor& a) { return wrap(ir::make_unary(ir::Op::Neg, node_of(a, "neg"))); }
Tensor operator<(const Tensor& a, const Tensor& b) { return binary(ir::Op::Lt, a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return binary(ir::Op::Le, a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return binary(ir::Op::Gt, a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return binary(ir::Op::Ge, a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return binary(ir::Op::Eq, a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return binary(ir::Op::Ne, a, b); }

Tensor exp(const Tensor& x, Loc loc) { return unary(ir::Op::Exp, x, loc); }
Tensor log(const Tensor& x, Loc loc) { return unary(ir::Op::Log, x, loc); }
Tensor sqrt(const Tensor& x, Loc loc) { return unary(ir::Op::Sqrt, x, loc); }
Tensor rsqrt(const Tensor& x, Loc loc) { return unary(ir::Op::Rsqrt, x, loc); }
Tensor tanh(const Tensor& x, Loc loc) { return unary(ir::Op::Tanh, x, loc); }
Tensor sigmoid(const Tensor& x, Loc loc) { return unary(ir::Op::Sigmoid, x, loc); }
Tensor relu(const Tensor& x, Loc loc) { return unary(ir::Op::Relu, x, loc); }
Tensor erf(const Tensor& x, Loc loc) { return unary(ir::Op::Erf, x, loc); }
Tensor abs(const Tensor& x, Loc loc) { return unary(ir::Op::Abs, x, loc); }
Tensor square(const Tensor& x, Loc loc) { return unary(ir::Op::Square, x, loc); }
Tensor neg(const Tensor& x, Loc loc) { return unary(ir::Op::Neg, x, loc); }

Tensor pow(const Tensor& x, const Tensor& y, Loc loc) {
  CallerLoc l(loc);
  return binary(ir::Op::Pow, x, y);
}
Tensor maximum(const Tensor& a, const Tensor& b, Loc loc) {
  CallerLoc l(loc);
  return binary(ir::Op::Maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b, Loc loc) {
  CallerLoc l(loc);
  return binary(ir::Op::Minimum, a, b);
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, Loc loc) {
  CallerLoc l(loc);
  return wrap(ir::make_where(node_of(cond, "where", "condition"), node_of(a, "where", "x"),
                             node_of(b, "where", "y")));
}
Tensor matmul(const Tensor& a, const Tensor& b, Loc loc) {
  CallerLoc l(loc);
  return wrap(ir::make_matmul(node_of(a, "matmul", "a"), node_of(b, "matmul", "b")));
}
Tensor operator_matmul(const Tensor& a, const Tensor& b) {
  return wrap(ir::make_matmul(node_of(a, "matmul", "a"), node_of(b, "matmul", "b")));
}
Tensor sum(const Tensor& x, Axes axes, bool keepdims, Loc loc) {
  return reduce(ir::Op::ReduceSum, x, axes, keepdims, loc);
}
Tensor mean(const Tensor& x, Axes axes, bool keepdims, Loc loc) {
  return reduce(ir::Op::ReduceMean, x, axes, keepdims, loc);
}
Tensor max(const Tensor& x, Axes axes, bool keepdims, Loc loc) {
  return reduce(ir::Op::ReduceMax, x, axes, keepdims, loc);
}
Tensor min(const Tensor& x, Axes axes, bool keepdims, Loc loc) {
  return reduce(ir::Op::ReduceMin, x, axes, keepdims, loc);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Conv2dParams p, Loc loc) {
  CallerLoc l(loc);
  NodePtr y = ir::make_conv2d(node_of(x, "conv2d", "x"), node_of(w, "conv2d", "w"), p);
  if (bias.defined()) {
    NodePtr b = bias.node();
    if (b->ndim() != 1 || b->shape[0] != y->shape[1])
      throw ShapeError("conv2d: bias must have shape [" + std::to_string(y->shape[1].value) +
                       "] (one per output channel), got " + ir::shape_str(b->shape));
    b = ir::make_reshape(b, {b->shape[0], ir::Dim::concrete(1), ir::Dim::concrete(1)});
    y = ir::make_binary(ir::Op::Add, y, b);
  }
  return wrap(y);
}
Tensor reshape(const Tensor& x, std::vector<int64_t> shape, Loc loc) {
  CallerLoc l(loc);
  const NodePtr& n = node_of(x, "reshape");
  int64_t known = 1, infer = -1;
  bool zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: only one dim can be -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw ShapeError("reshape: invalid dim " + std::to_string(shape[i]));
    } else if (shape[i] == 0) {
      zero = true;
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw ShapeError("reshape: the dims given multiply past 2^63 - 1 elements");
    }
  }
  if (zero) known = 0;
  if (!ir::is_concrete(n->shape)) {
    // A symbolic input: its one symbol becomes the -1 dim when the concrete dims regroup.
    auto syms = ir::symbols_of(n->shape);
    if (infer < 0 || syms.size() != 1 || known != ir::concrete_product(n->shape))
      throw ShapeError("reshape: cannot reshape " + ir::shape_str(n->shape) +
                       " with its symbolic dim; pass -1 where the symbolic dim goes and keep the "
                       "other dims' product");
    ir::Shape out = ir::concrete_shape(shape);
    out[infer] = ir::Dim::symbol(syms[0]);
    return wrap(ir::make_reshape(n, std::move(out)));
  }
  int64_t total = ir::numel(n->shape);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      throw ShapeError("reshape: cannot reshape " + ir::shape_str(n->shape) +
                       " into a shape with -1");
    shape[infer] = total / known;
  }
  return wrap(ir::make_reshape(n, ir::concrete_shape(shape)));
}
Tensor transpose(const Tensor& x, std::vector<int64_t> perm, Loc loc) {
  CallerLoc l(loc);
  const NodePtr& n = node_of(x, "transpose");
  if (perm.empty())
    for (int64_t i = n->ndim() - 1; i >= 0; --i) perm.push_back(i);
  return wrap(ir::make_permute(n, std::move(perm)));
}
Tensor broadcast_to(const Tensor& x, std::vector<int64_t> shape, Loc loc) {
  CallerLoc l(loc);
  const NodePtr& n = node_of(x, "broadcast_to");
  ir::Shape target;
  const size_t off = shape.size() >= n->shape.size() ? shape.size() - n->shape.size() : 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    // -1 stands for a symbolic dim of x (Python passes symbolic dims as -1).
    if (shape[i] == -1 && i >= off && n->shape[i - off].is_symbolic()) {
      target.push_back(n->shape[i - off]);
    } else if (shape[i] < 0) {
      throw ShapeError("broadcast_to: invalid dim " + std::to_string(shape[i]) + " in the shape");
    } else {
      target.push_back(ir::Dim::concrete(shape[i]));
    }
  }
  return wrap(ir::make_expand(n, std::move(target)));
}
Tensor concatenate(const std::vector<Tensor>& xs, int axis, Loc loc) {
  CallerLoc l(loc);
  std::vector<NodePtr> ns;
  for (const Tensor& t : xs) ns.push_back(node_of(t, "concatenate"));
  return wrap(ir::make_concat(std::move(ns), axis));
}
Tensor astype(const Tensor& x, DType dtype, Loc loc) {
  CallerLoc l(loc);
  return wrap(ir::make_cast(node_of(x, "astype"), dtype));
}

}  // namespace kiln
