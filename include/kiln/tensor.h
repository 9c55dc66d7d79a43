// kiln::Tensor: the value a traced function computes with. Every operation on a Tensor records a
// node of kiln's IR (with its shape and dtype checked); nothing is computed while tracing.
#pragma once

#include <kiln/dtype.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace kiln {

namespace ir {
struct Node;
}

using Loc = std::source_location;

// Axis selection for reductions: all axes (default), one axis, or several.
struct Axes {
  Axes() = default;
  Axes(int axis) : axes{axis}, all(false) {}  // NOLINT: implicit by design
  Axes(std::initializer_list<int> a) : axes(a), all(false) {}
  Axes(std::vector<int> a) : axes(std::move(a)), all(false) {}  // NOLINT
  std::vector<int> axes;
  bool all = true;
};

// One basic index for Tensor::index: an integer, a slice, a new axis or an ellipsis.
struct Index {
  enum class Kind : uint8_t { integer, slice, new_axis, ellipsis };
  Kind kind = Kind::slice;
  int64_t value = 0;                         // integer
  std::optional<int64_t> start, stop, step;  // slice
  static Index at(int64_t i) { return {Kind::integer, i, {}, {}, {}}; }
  static Index slice(std::optional<int64_t> start = {}, std::optional<int64_t> stop = {},
                     std::optional<int64_t> step = {}) {
    return {Kind::slice, 0, start, stop, step};
  }
  static Index new_axis() { return {Kind::new_axis, 0, {}, {}, {}}; }
  static Index ellipsis() { return {Kind::ellipsis, 0, {}, {}, {}}; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const ir::Node> node) : node_(std::move(node)) {}

  // The extents. A symbolic dim (dynamic shapes) has no extent while tracing: shape() throws
  // ShapeError for it (the dim is then kept exact, so arithmetic on extents stays right), and
  // symbolic_shape() reports it as -1, which reshape and broadcast_to take as that dim.
  std::vector<int64_t> shape() const;
  std::vector<int64_t> symbolic_shape() const;
  std::string shape_str() const;  // symbolic dims print their names
  DType dtype() const;
  int64_t ndim() const;
  bool defined() const { return node_ != nullptr; }
  const std::shared_ptr<const ir::Node>& node() const { return node_; }

  Tensor T(Loc loc = Loc::current()) const;
  Tensor sum(Axes axes = {}, bool keepdims = false, Loc loc = Loc::current()) const;
  Tensor mean(Axes axes = {}, bool keepdims = false, Loc loc = Loc::current()) const;
  Tensor max(Axes axes = {}, bool keepdims = false, Loc loc = Loc::current()) const;
  Tensor min(Axes axes = {}, bool keepdims = false, Loc loc = Loc::current()) const;
  Tensor reshape(std::vector<int64_t> shape, Loc loc = Loc::current()) const;
  Tensor transpose(std::vector<int64_t> perm = {}, Loc loc = Loc::current()) const;
  Tensor astype(DType dtype, Loc loc = Loc::current()) const;
  Tensor abs(Loc loc = Loc::current()) const;
  Tensor index(const std::vector<Index>& idx, Loc loc = Loc::current()) const;

 private:
  std::shared_ptr<const ir::Node> node_;
};

// Sets the source location ("file:line") recorded on nodes traced on this thread while it lives.
// Front ends (Python) use it so errors and dumps point at the user's line; when none is set, the
// C++ functions record their caller's std::source_location.
class ScopedTraceLocation {
 public:
  explicit ScopedTraceLocation(std::string loc);
  ~ScopedTraceLocation();
  ScopedTraceLocation(const ScopedTraceLocation&) = delete;
  ScopedTraceLocation& operator=(const ScopedTraceLocation&) = delete;

 private:
  std::string saved_;
};

// A scalar constant of the given dtype (used when a C++ number meets a Tensor).
Tensor scalar(double value, DType dtype, Loc loc = Loc::current());
// A constant tensor from host data (copied); the trace owns it.
Tensor constant(const void* data, std::vector<int64_t> shape, DType dtype,
                Loc loc = Loc::current());

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
// Python-number semantics: the scalar takes the tensor's dtype (an int tensor with a fractional
// double promotes to float64, as numpy does).
Tensor operator+(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(const Tensor& a, double b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(const Tensor& a, double b);
Tensor operator/(double a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);

// Binary op with a Python/C++ scalar on either side (numpy weak-scalar promotion).
Tensor with_scalar(const Tensor& t, double value, bool scalar_is_integer);

Tensor exp(const Tensor& x, Loc loc = Loc::current());
Tensor log(const Tensor& x, Loc loc = Loc::current());
Tensor sqrt(const Tensor& x, Loc loc = Loc::current());
Tensor rsqrt(const Tensor& x, Loc loc = Loc::current());
Tensor tanh(const Tensor& x, Loc loc = Loc::current());
Tensor sigmoid(const Tensor& x, Loc loc = Loc::current());
Tensor relu(const Tensor& x, Loc loc = Loc::current());
Tensor gelu(const Tensor& x, bool approximate = false, Loc loc = Loc::current());
Tensor silu(const Tensor& x, Loc loc = Loc::current());
Tensor erf(const Tensor& x, Loc loc = Loc::current());
Tensor abs(const Tensor& x, Loc loc = Loc::current());
Tensor square(const Tensor& x, Loc loc = Loc::current());
Tensor neg(const Tensor& x, Loc loc = Loc::current());
Tensor pow(const Tensor& x, const Tensor& y, Loc loc = Loc::current());
Tensor pow(const Tensor& x, double y, Loc loc = Loc::current());
Tensor maximum(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor minimum(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor clip(const Tensor& x, std::optional<double> lo, std::optional<double> hi,
            Loc loc = Loc::current());
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor matmul(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor operator_matmul(const Tensor& a, const Tensor& b);  // Python's @
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdims = false, Loc loc = Loc::current());
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdims = false, Loc loc = Loc::current());
Tensor max(const Tensor& x, Axes axes = {}, bool keepdims = false, Loc loc = Loc::current());
Tensor min(const Tensor& x, Axes axes = {}, bool keepdims = false, Loc loc = Loc::current());
Tensor softmax(const Tensor& x, int axis = -1, Loc loc = Loc::current());
Tensor log_softmax(const Tensor& x, int axis = -1, Loc loc = Loc::current());
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {},
                  int axis = -1, double eps = 1e-5, Loc loc = Loc::current());
Tensor rms_norm(const Tensor& x, const Tensor& weight = {}, int axis = -1, double eps = 1e-6,
                Loc loc = Loc::current());
struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = {}, Conv2dParams p = {},
              Loc loc = Loc::current());
Tensor reshape(const Tensor& x, std::vector<int64_t> shape, Loc loc = Loc::current());
Tensor transpose(const Tensor& x, std::vector<int64_t> perm = {}, Loc loc = Loc::current());
Tensor broadcast_to(const Tensor& x, std::vector<int64_t> shape, Loc loc = Loc::current());
Tensor concatenate(const std::vector<Tensor>& xs, int axis = 0, Loc loc = Loc::current());
Tensor astype(const Tensor& x, DType dtype, Loc loc = Loc::current());

}  // namespace kiln
