// Composite ops (softmax, log_softmax, layer_norm, rms_norm, gelu, silu) built from primitives.
// The root node keeps a Composite tag so a backend can match the whole pattern. They reduce with
// keepdims and broadcast back, the form the fusion pass keeps in one row kernel.
#include "ir/builder.h"
#include "ir/caller_loc.h"

#include <kiln/errors.h>
#include <kiln/tensor.h>

#include <cmath>

namespace kiln {

using ir::CallerLoc;

using ir::NodePtr;
using ir::Op;

namespace {

NodePtr need(const Tensor& t, const char* op) {
  if (!t.defined()) throw Error(std::string(op) + ": input is an undefined Tensor");
  return t.node();
}

// Composites compute in the input's float dtype (integers promote like numpy's float ops).
NodePtr as_float(NodePtr x) { return ir::make_cast(x, ir::float_result_dtype(x->dtype)); }

NodePtr scalar_like(double v, const NodePtr& x) { return ir::make_scalar(v, x->dtype); }

NodePtr bin(Op op, NodePtr a, NodePtr b) { return ir::make_binary(op, std::move(a), std::move(b)); }

void check_param(const NodePtr& p, const NodePtr& x, int64_t axis, const char* op,
                 const char* name) {
  if (p->ndim() != 1 || p->shape[0] != x->shape[axis])
    throw ShapeError(std::string(op) + ": " + name + " must have shape [" +
                     std::to_string(x->shape[axis].value) + "] (the normalized axis), got " +
                     ir::shape_str(p->shape));
}

// Broadcasts a 1-D parameter along `axis` of x.
NodePtr along_axis(NodePtr p, const NodePtr& x, int64_t axis) {
  ir::Shape s(x->ndim(), ir::Dim::concrete(1));
  s[axis] = x->shape[axis];
  return ir::make_reshape(p, s);
}

}  // namespace

Tensor softmax(const Tensor& t, int axis, Loc loc) {
  CallerLoc l(loc);
  NodePtr x = as_float(need(t, "softmax"));
  int64_t ax = ir::normalize_axis(axis, x->ndim(), "softmax");
  NodePtr m = ir::make_reduce(Op::ReduceMax, x, {ax}, true);
  NodePtr e = ir::make_unary(Op::Exp, bin(Op::Sub, x, m));
  NodePtr s = ir::make_reduce(Op::ReduceSum, e, {ax}, true);
  return Tensor(ir::tag_composite(bin(Op::Div, e, s), ir::Composite::softmax));
}

Tensor log_softmax(const Tensor& t, int axis, Loc loc) {
  CallerLoc l(loc);
  NodePtr x = as_float(need(t, "log_softmax"));
  int64_t ax = ir::normalize_axis(axis, x->ndim(), "log_softmax");
  NodePtr m = ir::make_reduce(Op::ReduceMax, x, {ax}, true);
  NodePtr shifted = bin(Op::Sub, x, m);
  NodePtr s = ir::make_reduce(Op::ReduceSum, ir::make_unary(Op::Exp, shifted), {ax}, true);
  return Tensor(ir::tag_composite(bin(Op::Sub, shifted, ir::make_unary(Op::Log, s)),
                                  ir::Composite::log_softmax));
}

Tensor layer_norm(const Tensor& t, const Tensor& weight, const Tensor& bias, int axis, double eps,
                  Loc loc) {
  CallerLoc l(loc);
  NodePtr x = as_float(need(t, "layer_norm"));
  int64_t ax = ir::normalize_axis(axis, x->ndim(), "layer_norm");
  // Two-pass (mean, then the mean of squared deviations): stable where E[x^2]-E[x]^2 is not.
  NodePtr mu = ir::make_reduce(Op::ReduceMean, x, {ax}, true);
  NodePtr xc = bin(Op::Sub, x, mu);
  NodePtr var = ir::make_reduce(Op::ReduceMean, ir::make_unary(Op::Square, xc), {ax}, true);
  NodePtr inv = ir::make_unary(Op::Rsqrt, bin(Op::Add, var, scalar_like(eps, var)));
  NodePtr y = bin(Op::Mul, xc, inv);
  if (weight.defined()) {
    check_param(weight.node(), x, ax, "layer_norm", "weight");
    y = bin(Op::Mul, y, along_axis(weight.node(), x, ax));
  }
  if (bias.defined()) {
    check_param(bias.node(), x, ax, "layer_norm", "bias");
    y = bin(Op::Add, y, along_axis(bias.node(), x, ax));
  }
  return Tensor(ir::tag_composite(y, ir::Composite::layer_norm));
}

Tensor rms_norm(const Tensor& t, const Tensor& weight, int axis, double eps, Loc loc) {
  CallerLoc l(loc);
  NodePtr x = as_float(need(t, "rms_norm"));
  int64_t ax = ir::normalize_axis(axis, x->ndim(), "rms_norm");
  NodePtr ms = ir::make_reduce(Op::ReduceMean, ir::make_unary(Op::Square, x), {ax}, true);
  NodePtr y = bin(Op::Mul, x, ir::make_unary(Op::Rsqrt, bin(Op::Add, ms, scalar_like(eps, ms))));
  if (weight.defined()) {
    check_param(weight.node(), x, ax, "rms_norm", "weight");
    y = bin(Op::Mul, y, along_axis(weight.node(), x, ax));
  }
  return Tensor(ir::tag_composite(y, ir::Composite::rms_norm));
}

Tensor gelu(const Tensor& t, bool approximate, Loc loc) {
  CallerLoc l(loc);
  NodePtr x = as_float(need(t, "gelu"));
  NodePtr half_x = bin(Op::Mul, x, scalar_like(0.5, x));
  NodePtr inner;
  if (approximate) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    NodePtr x3 = bin(Op::Mul, ir::make_unary(Op::Square, x), x);
    NodePtr u = bin(Op::Mul, bin(Op::Add, x, bin(Op::Mul, x3, scalar_like(0.044715, x))),
                    scalar_like(std::sqrt(2.0 / M_PI), x));
    inner = ir::make_unary(Op::Tanh, u);
  } else {
    inner = ir::make_unary(Op::Erf, bin(Op::Mul, x, scalar_like(M_SQRT1_2, x)));
  }
  NodePtr y = bin(Op::Mul, half_x, bin(Op::Add, inner, scalar_like(1.0, x)));
  return Tensor(ir::tag_composite(y, approximate ? ir::Composite::gelu_tanh : ir::Composite::gelu));
}

Tensor silu(const Tensor& t, Loc loc) {
  CallerLoc l(loc);
  NodePtr x = as_float(need(t, "silu"));
  return Tensor(
      ir::tag_composite(bin(Op::Mul, x, ir::make_unary(Op::Sigmoid, x)), ir::Composite::silu));
}

}  // namespace kiln
