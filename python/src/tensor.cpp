// kiln._kiln.TensorImpl and the traced operations on it. The Python kiln.Tensor proxy
// (python/kiln/_tensor.py) wraps a TensorImpl and does what is Python-specific: operator protocol,
// weak scalars, numpy constants, index parsing. Every op here records the user's file:line, which
// the proxy sets just before it calls in (set_loc).
#include "common.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <tuple>

namespace kiln::py {

namespace {

// The location of the op being traced on this thread; replaced by every set_loc.
thread_local std::unique_ptr<ScopedTraceLocation> tl_loc;

void set_loc(const std::string& loc) {
  tl_loc.reset();
  if (!loc.empty()) tl_loc = std::make_unique<ScopedTraceLocation>(loc);
}

DType dtype_of(const std::string& name) { return dtype_from_name(name); }

Axes axes_of(const std::optional<std::vector<int>>& axes) {
  if (!axes) return Axes{};
  return Axes(*axes);
}

Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor{}; }

IntegerValue integer_value(bool negative, uint64_t magnitude) {
  IntegerValue v;
  v.negative = negative && magnitude != 0;
  v.magnitude = magnitude;
  return v;
}

ScalarOp comparison_of(const std::string& op) {
  if (op == "lt") return ScalarOp::lt;
  if (op == "le") return ScalarOp::le;
  if (op == "gt") return ScalarOp::gt;
  if (op == "ge") return ScalarOp::ge;
  if (op == "eq") return ScalarOp::eq;
  if (op == "ne") return ScalarOp::ne;
  throw Error("compare_int: op is '" + op + "', expected lt, le, gt, ge, eq or ne");
}

using IndexSpec = std::tuple<int, int64_t, std::optional<int64_t>, std::optional<int64_t>,
                             std::optional<int64_t>>;

}  // namespace

void clear_trace_loc() { tl_loc.reset(); }

void init_tensor(nb::module_& m) {
  nb::class_<Tensor>(m, "TensorImpl")
      .def_prop_ro("shape", &Tensor::symbolic_shape)
      .def_prop_ro("shape_str", &Tensor::shape_str)
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_prop_ro("ndim", &Tensor::ndim)
      .def("__repr__", [](const Tensor& t) {
        return "TensorImpl(" + t.shape_str() + ", " + std::string(dtype_name(t.dtype())) + ")";
      });

  nb::module_ o = m.def_submodule("ops", "Traced operations on TensorImpl");
  o.def("set_loc", &set_loc);
  o.def("clear_loc", [] { tl_loc.reset(); });

#define KILN_UNARY(name) o.def(#name, [](const Tensor& x) { return kiln::name(x); });
  KILN_UNARY(exp)
  KILN_UNARY(log)
  KILN_UNARY(sqrt)
  KILN_UNARY(rsqrt)
  KILN_UNARY(tanh)
  KILN_UNARY(sigmoid)
  KILN_UNARY(relu)
  KILN_UNARY(silu)
  KILN_UNARY(erf)
  KILN_UNARY(abs)
  KILN_UNARY(square)
  KILN_UNARY(neg)
#undef KILN_UNARY
  o.def("gelu", [](const Tensor& x, bool approximate) { return kiln::gelu(x, approximate); });

  o.def("add", [](const Tensor& a, const Tensor& b) { return a + b; });
  o.def("sub", [](const Tensor& a, const Tensor& b) { return a - b; });
  o.def("mul", [](const Tensor& a, const Tensor& b) { return a * b; });
  o.def("div", [](const Tensor& a, const Tensor& b) { return a / b; });
  o.def("lt", [](const Tensor& a, const Tensor& b) { return a < b; });
  o.def("le", [](const Tensor& a, const Tensor& b) { return a <= b; });
  o.def("gt", [](const Tensor& a, const Tensor& b) { return a > b; });
  o.def("ge", [](const Tensor& a, const Tensor& b) { return a >= b; });
  o.def("eq", [](const Tensor& a, const Tensor& b) { return a == b; });
  o.def("ne", [](const Tensor& a, const Tensor& b) { return a != b; });
  o.def("pow", [](const Tensor& a, const Tensor& b) { return kiln::pow(a, b); });
  o.def("pow_scalar", [](const Tensor& a, double b) { return kiln::pow(a, b); });
  // A Python int as its sign and magnitude (the caller bounds the magnitude by 2^64 - 1, past
  // every integer dtype), exactly: kiln::IntegerValue.
  o.def("pow_int", [](const Tensor& a, bool negative, uint64_t magnitude) {
    return kiln::integer_pow(a, integer_value(negative, magnitude));
  });
  o.def("compare_int",
        [](const std::string& op, const Tensor& a, bool negative, uint64_t magnitude) {
          return kiln::integer_scalar_op(comparison_of(op), a, integer_value(negative, magnitude));
        });
  o.def("maximum", [](const Tensor& a, const Tensor& b) { return kiln::maximum(a, b); });
  o.def("minimum", [](const Tensor& a, const Tensor& b) { return kiln::minimum(a, b); });
  o.def("matmul", [](const Tensor& a, const Tensor& b) { return kiln::matmul(a, b); });
  o.def("where",
        [](const Tensor& c, const Tensor& a, const Tensor& b) { return kiln::where(c, a, b); });
  o.def("clip", [](const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
    return kiln::clip(x, lo, hi);
  });
  // Integer bounds already inside x's integer dtype, exactly (through a double an int64 bound
  // past 2^53 rounded, and past 9e15 made the result float64).
  o.def("clip_int", [](const Tensor& x, std::optional<int64_t> lo, std::optional<int64_t> hi) {
    Tensor r = x;
    if (lo) r = kiln::maximum(r, kiln::scalar(*lo, x.dtype()));
    if (hi) r = kiln::minimum(r, kiln::scalar(*hi, x.dtype()));
    return r;
  });

  o.def("sum", [](const Tensor& x, std::optional<std::vector<int>> axes, bool keepdims) {
    return kiln::sum(x, axes_of(axes), keepdims);
  });
  o.def("mean", [](const Tensor& x, std::optional<std::vector<int>> axes, bool keepdims) {
    return kiln::mean(x, axes_of(axes), keepdims);
  });
  o.def("max", [](const Tensor& x, std::optional<std::vector<int>> axes, bool keepdims) {
    return kiln::max(x, axes_of(axes), keepdims);
  });
  o.def("min", [](const Tensor& x, std::optional<std::vector<int>> axes, bool keepdims) {
    return kiln::min(x, axes_of(axes), keepdims);
  });
  o.def("softmax", [](const Tensor& x, int axis) { return kiln::softmax(x, axis); });
  o.def("log_softmax", [](const Tensor& x, int axis) { return kiln::log_softmax(x, axis); });
  o.def("layer_norm",
        [](const Tensor& x, std::optional<Tensor> w, std::optional<Tensor> b, int axis,
           double eps) { return kiln::layer_norm(x, opt(w), opt(b), axis, eps); });
  o.def("rms_norm", [](const Tensor& x, std::optional<Tensor> w, int axis, double eps) {
    return kiln::rms_norm(x, opt(w), axis, eps);
  });
  o.def("conv2d", [](const Tensor& x, const Tensor& w, std::optional<Tensor> bias,
                     std::tuple<int64_t, int64_t> stride, std::tuple<int64_t, int64_t> padding,
                     std::tuple<int64_t, int64_t> dilation, int64_t groups) {
    Conv2dParams p;
    p.stride[0] = std::get<0>(stride);
    p.stride[1] = std::get<1>(stride);
    p.padding[0] = std::get<0>(padding);
    p.padding[1] = std::get<1>(padding);
    p.dilation[0] = std::get<0>(dilation);
    p.dilation[1] = std::get<1>(dilation);
    p.groups = groups;
    return kiln::conv2d(x, w, opt(bias), p);
  });

  o.def("reshape",
        [](const Tensor& x, std::vector<int64_t> shape) { return kiln::reshape(x, shape); });
  o.def("transpose",
        [](const Tensor& x, std::vector<int64_t> perm) { return kiln::transpose(x, perm); });
  o.def("broadcast_to",
        [](const Tensor& x, std::vector<int64_t> shape) { return kiln::broadcast_to(x, shape); });
  o.def("concatenate",
        [](const std::vector<Tensor>& xs, int axis) { return kiln::concatenate(xs, axis); });
  o.def("astype",
        [](const Tensor& x, const std::string& dtype) { return kiln::astype(x, dtype_of(dtype)); });
  o.def("T", [](const Tensor& x) { return x.T(); });
  o.def("index", [](const Tensor& x, const std::vector<IndexSpec>& specs) {
    std::vector<Index> idx;
    idx.reserve(specs.size());
    for (const auto& [kind, value, start, stop, step] : specs) {
      switch (kind) {
        case 0:
          idx.push_back(Index::at(value));
          break;
        case 1:
          idx.push_back(Index::slice(start, stop, step));
          break;
        case 2:
          idx.push_back(Index::new_axis());
          break;
        default:
          idx.push_back(Index::ellipsis());
          break;
      }
    }
    return x.index(idx);
  });
  o.def("scalar", [](double value, const std::string& dtype) {
    return kiln::scalar(value, dtype_of(dtype));
  });
  // A constant from the raw bytes of a C-contiguous numpy array (copied into the trace).
  o.def("constant", [](nb::bytes data, std::vector<int64_t> shape, const std::string& dtype) {
    return kiln::constant(data.c_str(), std::move(shape), dtype_of(dtype));
  });
  o.def("dtype_name",
        [](const std::string& name) { return std::string(dtype_name(dtype_of(name))); });
}

}  // namespace kiln::py
