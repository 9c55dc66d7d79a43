// kiln::Tensor: the value a traced function computes with. Every operation on a Tensor records a
// node of kiln's IR (with its shape and dtype checked); nothing is computed while tracing.
#pragma once

#include <kiln/dtype.h>

#include <concepts>
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

Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);

// Binary op with a Python/C++ scalar on either side (numpy weak-scalar promotion). An integral
// double outside an integer tensor's dtype acts as a float (int8 x + 300.0 is float64, as numpy's
// x + 300.0; it wrapped to 44 before).
Tensor with_scalar(const Tensor& t, double value, bool scalar_is_integer);

// Integer C++ numbers (int, int64_t, size_t, char, ...; not bool) are taken exactly, as Python
// passes its ints: the number takes the tensor's dtype (int64 beside a bool tensor), an int64 past
// 2^53 is not rounded through a double, arithmetic with a number outside an integer tensor's dtype
// is a DTypeError (numpy raises OverflowError), and a comparison with one answers for every
// element (an int8 x < 1000 is all true, as numpy's).
template <typename T>
concept IntegerScalar = std::integral<T> && !std::same_as<T, bool>;

// An integer's sign and magnitude: every integral type's values, int64's and uint64's alike.
struct IntegerValue {
  bool negative = false;
  uint64_t magnitude = 0;
  IntegerValue() = default;
  template <IntegerScalar T>
  constexpr IntegerValue(T v)  // NOLINT: implicit by design
      : negative(v < 0),
        magnitude(v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v)) {}
};

enum class ScalarOp : uint8_t { add, sub, mul, div, lt, le, gt, ge, eq, ne };

// t OP value, or value OP t with scalar_first (the operators below call it).
Tensor integer_scalar_op(ScalarOp op, const Tensor& t, IntegerValue value,
                         bool scalar_first = false);
Tensor integer_scalar(IntegerValue value, DType dtype, Loc loc = Loc::current());
Tensor integer_pow(const Tensor& x, IntegerValue y, Loc loc = Loc::current());

// An integer C++ number as a constant of `dtype`, exactly (a DTypeError where it is outside an
// integer dtype).
template <IntegerScalar T>
Tensor scalar(T value, DType dtype, Loc loc = Loc::current()) {
  return integer_scalar(value, dtype, loc);
}
#define KILN_INTEGER_SCALAR_OP(OP, NAME)                                   \
  template <IntegerScalar T>                                               \
  Tensor operator OP(const Tensor& a, T b) {                               \
    return integer_scalar_op(ScalarOp::NAME, a, b);                        \
  }                                                                        \
  template <IntegerScalar T>                                               \
  Tensor operator OP(T a, const Tensor& b) {                               \
    return integer_scalar_op(ScalarOp::NAME, b, a, /*scalar_first=*/true); \
  }
KILN_INTEGER_SCALAR_OP(+, add)
KILN_INTEGER_SCALAR_OP(-, sub)
KILN_INTEGER_SCALAR_OP(*, mul)
KILN_INTEGER_SCALAR_OP(/, div)
KILN_INTEGER_SCALAR_OP(<, lt)
KILN_INTEGER_SCALAR_OP(<=, le)
KILN_INTEGER_SCALAR_OP(>, gt)
KILN_INTEGER_SCALAR_OP(>=, ge)
KILN_INTEGER_SCALAR_OP(==, eq)
KILN_INTEGER_SCALAR_OP(!=, ne)
#undef KILN_INTEGER_SCALAR_OP

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
template <IntegerScalar T>
Tensor pow(const Tensor& x, T y, Loc loc = Loc::current()) {
  return integer_pow(x, y, loc);
}
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
