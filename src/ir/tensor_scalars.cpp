// Numbers beside a Tensor in the public API, promoted as numpy promotes Python scalars (NEP 50):
// the number takes the tensor's dtype, except a float next to an integer or bool tensor (float64)
// and an integer next to a bool tensor (int64).
//
// A C++ double that holds an integer acts as an integer (x + 2.0 keeps an int tensor's dtype) where
// the tensor's dtype holds it; integral C++ numbers (IntegerValue) are exact, and one outside an
// integer tensor's dtype is a DTypeError in arithmetic and a known answer in a comparison, as
// numpy's OverflowError and its comparisons with out-of-range Python ints.
#include "ir/caller_loc.h"
#include "ir/host_tensor.h"
#include "ir/tensor_access.h"

#include <kiln/errors.h>
#include <kiln/tensor.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace kiln {

using ir::binary;
using ir::CallerLoc;
using ir::node_of;
using ir::NodePtr;
using ir::wrap;

namespace {

bool is_int_value(double v) { return std::nearbyint(v) == v && std::abs(v) < 9.0e15; }

struct IntRange {
  int64_t lo, hi;
};

std::optional<IntRange> int_range(DType t) {
  switch (t) {
    case DType::i8:
      return IntRange{std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max()};
    case DType::i32:
      return IntRange{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::i64:
      return IntRange{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    default:
      return std::nullopt;
  }
}

// -1 where v is below r, +1 above it, 0 inside.
int side_of(IntegerValue v, IntRange r) {
  if (v.negative) return v.magnitude > uint64_t{0} - static_cast<uint64_t>(r.lo) ? -1 : 0;
  return v.magnitude > static_cast<uint64_t>(r.hi) ? 1 : 0;
}

// v as an int64, where side_of(v, int64's range) is 0 (C++20 conversions wrap modulo 2^64).
int64_t to_int64(IntegerValue v) {
  return v.negative ? static_cast<int64_t>(uint64_t{0} - v.magnitude)
                    : static_cast<int64_t>(v.magnitude);
}

double to_double(IntegerValue v) {
  const double m = static_cast<double>(v.magnitude);
  return v.negative ? -m : m;
}

std::string text(IntegerValue v) { return (v.negative ? "-" : "") + std::to_string(v.magnitude); }

[[noreturn]] void out_of_bounds(const char* what, IntegerValue v, DType t, IntRange r) {
  throw DTypeError(std::string(what) + ": the integer " + text(v) + " is out of bounds for " +
                   std::string(dtype_name(t)) + " (" + std::to_string(r.lo) + " to " +
                   std::to_string(r.hi) + "); numpy raises OverflowError here (cast to a wider " +
                   "dtype first)");
}

// A 0-d constant of `dtype` holding v, exactly for the integer dtypes (v checked against them).
NodePtr integer_constant(const char* what, IntegerValue v, DType dtype) {
  if (is_floating(dtype)) return ir::make_scalar(to_double(v), dtype);
  std::vector<uint8_t> bytes(dtype_size(dtype));
  if (dtype == DType::boolean) {
    ir::encode_int_element(dtype, v.magnitude != 0 ? 1 : 0, bytes.data());
  } else {
    const IntRange r = *int_range(dtype);
    if (side_of(v, r) != 0) out_of_bounds(what, v, dtype, r);
    ir::encode_int_element(dtype, to_int64(v), bytes.data());
  }
  return ir::make_constant(dtype, {}, std::move(bytes));
}

// The dtype numpy gives a Python int beside a tensor of dtype t.
DType integer_scalar_dtype(DType t) { return t == DType::boolean ? DType::i64 : t; }

bool is_comparison(ScalarOp op) { return op >= ScalarOp::lt; }

ir::Op to_ir(ScalarOp op) {
  switch (op) {
    case ScalarOp::add:
      return ir::Op::Add;
    case ScalarOp::sub:
      return ir::Op::Sub;
    case ScalarOp::mul:
      return ir::Op::Mul;
    case ScalarOp::div:
      return ir::Op::Div;
    case ScalarOp::lt:
      return ir::Op::Lt;
    case ScalarOp::le:
      return ir::Op::Le;
    case ScalarOp::gt:
      return ir::Op::Gt;
    case ScalarOp::ge:
      return ir::Op::Ge;
    case ScalarOp::eq:
      return ir::Op::Eq;
    case ScalarOp::ne:
      return ir::Op::Ne;
  }
  return ir::Op::Add;
}

// `value OP t` as `t OP' value`.
ScalarOp mirrored(ScalarOp op) {
  switch (op) {
    case ScalarOp::lt:
      return ScalarOp::gt;
    case ScalarOp::le:
      return ScalarOp::ge;
    case ScalarOp::gt:
      return ScalarOp::lt;
    case ScalarOp::ge:
      return ScalarOp::le;
    default:
      return op;
  }
}

// t OP value for every element, where value is past every element's end on `side` (+1 above).
bool comparison_answer(ScalarOp op, int side) {
  if (op == ScalarOp::eq) return false;
  if (op == ScalarOp::ne) return true;
  const bool value_above = side > 0;
  return (op == ScalarOp::lt || op == ScalarOp::le) == value_above;
}

}  // namespace

Tensor scalar(double value, DType dtype, Loc loc) {
  CallerLoc l(loc);
  return wrap(ir::make_scalar(value, dtype));
}

Tensor integer_scalar(IntegerValue value, DType dtype, Loc loc) {
  CallerLoc l(loc);
  return wrap(integer_constant("scalar", value, dtype));
}

Tensor with_scalar(const Tensor& t, double value, bool scalar_is_integer) {
  const DType td = node_of(t, "scalar operand")->dtype;
  // An integral double an integer tensor's dtype cannot hold is a float, as it is in numpy.
  if (auto r = int_range(td);
      scalar_is_integer && r && !(value >= static_cast<double>(r->lo) && value <= r->hi))
    scalar_is_integer = false;
  DType sd = td;
  if (!scalar_is_integer && !is_floating(td))
    sd = DType::f64;
  else if (scalar_is_integer && td == DType::boolean)
    sd = DType::i64;
  return Tensor(ir::make_scalar(value, sd));
}

Tensor integer_scalar_op(ScalarOp op, const Tensor& t, IntegerValue value, bool scalar_first) {
  const ir::Op iop = to_ir(op);
  const char* name = ir::op_name(iop).data();
  const NodePtr& n = node_of(t, name, scalar_first ? "right operand" : "left operand");
  // True division of an integer or bool tensor is in float64, the number too (numpy's int8 x /
  // 1000 is x / 1000.0, not an OverflowError).
  const DType sd =
      op == ScalarOp::div && !is_floating(n->dtype) ? DType::f64 : integer_scalar_dtype(n->dtype);
  if (auto r = int_range(sd); r && is_comparison(op)) {
    if (const int side = side_of(value, *r); side != 0) {
      const bool answer = comparison_answer(scalar_first ? mirrored(op) : op, side);
      return wrap(ir::make_expand(ir::make_scalar(answer ? 1.0 : 0.0, DType::boolean), n->shape));
    }
  }
  Tensor s = wrap(integer_constant(name, value, sd));
  return scalar_first ? binary(iop, s, t) : binary(iop, t, s);
}

#define KILN_SCALAR_OPS(OP)                         \
  Tensor operator OP(const Tensor& a, double b) {   \
    return a OP with_scalar(a, b, is_int_value(b)); \
  }                                                 \
  Tensor operator OP(double a, const Tensor& b) { return with_scalar(b, a, is_int_value(a)) OP b; }
KILN_SCALAR_OPS(+)
KILN_SCALAR_OPS(-)
KILN_SCALAR_OPS(*)
KILN_SCALAR_OPS(/)
#undef KILN_SCALAR_OPS
Tensor operator<(const Tensor& a, double b) { return a < with_scalar(a, b, is_int_value(b)); }
Tensor operator>(const Tensor& a, double b) { return a > with_scalar(a, b, is_int_value(b)); }
Tensor operator<=(const Tensor& a, double b) { return a <= with_scalar(a, b, is_int_value(b)); }
Tensor operator>=(const Tensor& a, double b) { return a >= with_scalar(a, b, is_int_value(b)); }
Tensor operator==(const Tensor& a, double b) { return a == with_scalar(a, b, is_int_value(b)); }
Tensor operator!=(const Tensor& a, double b) { return a != with_scalar(a, b, is_int_value(b)); }

namespace {

[[noreturn]] void negative_integer_power(DType t, const std::string& exponent) {
  throw DTypeError("pow: x is " + std::string(dtype_name(t)) + " and the exponent " + exponent +
                   " is a negative integer; numpy does not raise integers to negative integer "
                   "powers (cast x to a float dtype first)");
}

}  // namespace

Tensor pow(const Tensor& x, double y, Loc loc) {
  CallerLoc l(loc);
  const DType t = node_of(x, "pow")->dtype;
  if (y < 0 && is_int_value(y) && !is_floating(t))
    negative_integer_power(t, std::to_string(static_cast<int64_t>(y)));
  if (y == 2.0) return wrap(ir::make_unary(ir::Op::Square, node_of(x, "pow")));
  return binary(ir::Op::Pow, x, with_scalar(x, y, is_int_value(y)));
}

Tensor integer_pow(const Tensor& x, IntegerValue y, Loc loc) {
  CallerLoc l(loc);
  const NodePtr& n = node_of(x, "pow");
  if (y.negative && !is_floating(n->dtype)) negative_integer_power(n->dtype, text(y));
  if (!y.negative && y.magnitude == 2) return wrap(ir::make_unary(ir::Op::Square, n));
  return binary(ir::Op::Pow, x, wrap(integer_constant("pow", y, integer_scalar_dtype(n->dtype))));
}

Tensor clip(const Tensor& x, std::optional<double> lo, std::optional<double> hi, Loc loc) {
  CallerLoc l(loc);
  // An integral bound past an integer tensor's range bounds nothing on that side: it is clamped to
  // the range (numpy's result; as it was, it wrapped, and int8 clip(-1000, 1000) gave -24).
  const DType t = node_of(x, "clip", "x")->dtype;
  auto bound = [&](double b) {
    if (auto r = int_range(t); r && is_int_value(b)) {
      const int64_t v = b <= static_cast<double>(r->lo)   ? r->lo
                        : b >= static_cast<double>(r->hi) ? r->hi
                                                          : static_cast<int64_t>(b);
      return wrap(integer_constant("clip", v, t));
    }
    return with_scalar(x, b, is_int_value(b));
  };
  Tensor r = x;
  if (lo) r = binary(ir::Op::Maximum, r, bound(*lo));
  if (hi) r = binary(ir::Op::Minimum, r, bound(*hi));
  return r;
}

}  // namespace kiln
