// The reference interpreter: every op of ops.def evaluated in plain C++, floats on doubles and
// integers and bools exactly on int64 (wrapping modulo 2^64: adds, products, sums, max and
// comparisons of int64s past 2^53 are exact, as in kiln's kernels), with the rounding rule below.
// Integer division is true division, computed on doubles; integer pow squares and multiplies,
// wrapping, as numpy and kiln's kernels do. Strided walks use precomputed strides and one odometer
// per tensor, so the cost is O(output * reduction) and nothing is allocated per element.
//
// Rounding rule (what makes the oracle agree with kiln's kernels):
//   - After every op, the result is rounded to the node's dtype when that dtype is an integer
//     (wrap like two's complement: int8 wraps mod 256, ...), bool (v != 0) or float32 (round to
//     nearest even). float64 needs no rounding. An integer converts to a float rounded once (to
//     float16 and bfloat16 by way of float32, as the kernels convert them).
//   - float16 and bfloat16 results are NOT rounded between ops: kiln computes such values in
//     float32 across a fused chain and rounds only when it stores them, so the oracle keeps them
//     exact (in double). The exceptions are Cast nodes (a Cast to f16/bf16 rounds, as the
//     conversion instruction does) and the graph outputs, which `interpret` rounds to their dtype.
//   - Float -> integer conversion truncates toward zero, then wraps; NaN and +-inf give 0 (C++ and
//     numpy leave those undefined; the oracle picks 0 so that it stays deterministic).
#include "ir/interpreter.h"
#include "ir/interpreter_ops.h"

#include <kiln/errors.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "support/check.h"

namespace kiln::ir {

namespace {

using namespace interp;

// out[k] = in[offset k], offsets walked over out.shape with the given strides.
void gather(const HostTensor& in, HostTensor& out, const std::vector<int64_t>& strides,
            int64_t base) {
  with_element_type(in, [&](auto t) {
    auto& dst = elements(out, t);
    dst.resize(static_cast<size_t>(out.numel()));
    auto* o = dst.data();
    const auto* src = elements(in, t).data();
    for_each_offset(out.shape, strides, base, [&](int64_t off) { *o++ = src[off]; });
  });
}

template <typename T, typename F>
void map1(const HostTensor& a, HostTensor& out, F f) {
  const auto& x = elements(a, T{});
  auto& o = elements(out, T{});
  o.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) o[i] = f(x[i]);
}

template <typename T, typename F>
void map2(const HostTensor& a, const HostTensor& b, HostTensor& out, F f) {
  const auto &x = elements(a, T{}), &y = elements(b, T{});
  auto& o = elements(out, T{});
  o.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) o[i] = f(x[i], y[i]);
}

// The integer unary ops; false for the float functions, which an integer reads as a double.
bool eval_int_unary(Op op, const HostTensor& a, HostTensor& out) {
  using I = int64_t;
  switch (op) {
    case Op::Neg:
      map1<I>(a, out, [](I x) { return wrapping_sub(0, x); });
      return true;
    case Op::Abs:
      map1<I>(a, out, [](I x) { return x < 0 ? wrapping_sub(0, x) : x; });
      return true;
    case Op::Relu:
      map1<I>(a, out, [](I x) { return x > 0 ? x : I{0}; });
      return true;
    case Op::Square:
      map1<I>(a, out, [](I x) { return wrapping_mul(x, x); });
      return true;
    case Op::Not:
      map1<I>(a, out, [](I x) { return I{x == 0}; });
      return true;
    default:
      return false;
  }
}

void eval_unary(Op op, const HostTensor& a, HostTensor& out) {
  if (holds_ints(a.dtype) && holds_ints(out.dtype) && eval_int_unary(op, a, out)) return;
  const auto map1 = [&](auto f) { ::kiln::ir::map1<double>(a, out, f); };
  switch (op) {
    case Op::Neg:
      return map1([](double x) { return -x; });
    case Op::Abs:
      return map1([](double x) { return std::fabs(x); });
    case Op::Exp:
      return map1([](double x) { return std::exp(x); });
    case Op::Log:
      return map1([](double x) { return std::log(x); });
    case Op::Sqrt:
      return map1([](double x) { return std::sqrt(x); });
    case Op::Rsqrt:
      return map1([](double x) { return 1.0 / std::sqrt(x); });
    case Op::Tanh:
      return map1([](double x) { return std::tanh(x); });
    case Op::Sigmoid:
      return map1([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
    case Op::Relu:
      return map1([](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); });
    case Op::Erf:
      return map1([](double x) { return std::erf(x); });
    case Op::Square:
      return map1([](double x) { return x * x; });
    case Op::Not:
      return map1([](double x) { return x == 0 ? 1.0 : 0.0; });
    default:
      break;
  }
  KILN_CHECK(false) << "interpreter: unhandled unary op " << op_name(op);
}

// The integer binary ops; false for Div, which an integer reads as a double (true division).
bool eval_int_binary(Op op, const HostTensor& a, const HostTensor& b, HostTensor& out) {
  using I = int64_t;
  const auto map2 = [&](auto f) { ::kiln::ir::map2<I>(a, b, out, f); };
  switch (op) {
    case Op::Add:
      map2(wrapping_add);
      return true;
    case Op::Sub:
      map2(wrapping_sub);
      return true;
    case Op::Mul:
      map2(wrapping_mul);
      return true;
    case Op::Pow:
      map2(wrapping_pow);
      return true;
    case Op::Maximum:
      map2([](I x, I y) { return x > y ? x : y; });
      return true;
    case Op::Minimum:
      map2([](I x, I y) { return x < y ? x : y; });
      return true;
    case Op::Lt:
      map2([](I x, I y) { return I{x < y}; });
      return true;
    case Op::Le:
      map2([](I x, I y) { return I{x <= y}; });
      return true;
    case Op::Gt:
      map2([](I x, I y) { return I{x > y}; });
      return true;
    case Op::Ge:
      map2([](I x, I y) { return I{x >= y}; });
      return true;
    case Op::Eq:
      map2([](I x, I y) { return I{x == y}; });
      return true;
    case Op::Ne:
      map2([](I x, I y) { return I{x != y}; });
      return true;
    case Op::And:
      map2([](I x, I y) { return I{x != 0 && y != 0}; });
      return true;
    case Op::Or:
      map2([](I x, I y) { return I{x != 0 || y != 0}; });
      return true;
    default:
      return false;
  }
}

void eval_binary(Op op, const HostTensor& a, const HostTensor& b, HostTensor& out) {
  if (holds_ints(a.dtype) && eval_int_binary(op, a, b, out)) return;
  auto b2d = [](bool c) { return c ? 1.0 : 0.0; };
  const auto map2 = [&](auto f) { ::kiln::ir::map2<double>(a, b, out, f); };
  switch (op) {
    case Op::Add:
      return map2([](double x, double y) { return x + y; });
    case Op::Sub:
      return map2([](double x, double y) { return x - y; });
    case Op::Mul:
      return map2([](double x, double y) { return x * y; });
    case Op::Div:
      return map2([](double x, double y) { return x / y; });
    case Op::Pow:
      return map2([](double x, double y) { return std::pow(x, y); });
    case Op::Maximum:
      return map2([](double x, double y) {
        return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                              : (x > y ? x : y);
      });
    case Op::Minimum:
      return map2([](double x, double y) {
        return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                              : (x < y ? x : y);
      });
    case Op::Lt:
      return map2([&](double x, double y) { return b2d(x < y); });
    case Op::Le:
      return map2([&](double x, double y) { return b2d(x <= y); });
    case Op::Gt:
      return map2([&](double x, double y) { return b2d(x > y); });
    case Op::Ge:
      return map2([&](double x, double y) { return b2d(x >= y); });
    case Op::Eq:
      return map2([&](double x, double y) { return b2d(x == y); });
    case Op::Ne:
      return map2([&](double x, double y) { return b2d(x != y); });
    case Op::And:
      return map2([&](double x, double y) { return b2d(x != 0 && y != 0); });
    case Op::Or:
      return map2([&](double x, double y) { return b2d(x != 0 || y != 0); });
    default:
      break;
  }
  KILN_CHECK(false) << "interpreter: unhandled binary op " << op_name(op);
}

void eval_expand(const HostTensor& in, HostTensor& out) {
  const size_t off = out.shape.size() - in.shape.size();
  const std::vector<int64_t> in_strides = row_major_strides(in.shape);
  std::vector<int64_t> strides(out.shape.size(), 0);
  for (size_t i = 0; i < in.shape.size(); ++i)
    strides[i + off] = in.shape[i] == 1 ? 0 : in_strides[i];
  gather(in, out, strides, 0);
}

void eval_permute(const Node& n, const HostTensor& in, HostTensor& out) {
  const std::vector<int64_t> in_strides = row_major_strides(in.shape);
  std::vector<int64_t> strides(out.shape.size());
  for (size_t i = 0; i < strides.size(); ++i) strides[i] = in_strides[n.attrs.perm[i]];
  gather(in, out, strides, 0);
}

void eval_slice(const Node& n, const HostTensor& in, HostTensor& out) {
  const std::vector<int64_t> in_strides = row_major_strides(in.shape);
  std::vector<int64_t> strides(out.shape.size());
  int64_t base = 0;
  for (size_t i = 0; i < strides.size(); ++i) {
    base += n.attrs.starts[i] * in_strides[i];
    strides[i] = n.attrs.steps[i] * in_strides[i];
  }
  gather(in, out, strides, base);
}

void eval_concat(const Node& n, const std::vector<const HostTensor*>& in, HostTensor& out) {
  const int64_t axis = n.attrs.axis;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out.shape[d];
  for (size_t d = axis + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  with_element_type(out, [&](auto t) {
    auto& result = elements(out, t);
    result.resize(static_cast<size_t>(out.numel()));
    auto* o = result.data();
    for (int64_t i = 0; i < outer; ++i)
      for (const HostTensor* x : in) {
        const int64_t chunk = x->shape[axis] * inner;
        const auto* src = elements(*x, t).data() + i * chunk;
        o = std::copy(src, src + chunk, o);
      }
  });
}

// Converts a Cast's input: integers to floats rounded once (as the conversion instruction does;
// float16 and bfloat16 by way of float32, as kiln's kernels compute them), floats to integers
// later (truncated and wrapped by eval_node), integers to integers wrapped later.
void eval_cast(const HostTensor& in, HostTensor& out) {
  if (!holds_ints(in.dtype)) {
    out.values = in.values;
    return;
  }
  if (holds_ints(out.dtype)) {
    out.ints = in.ints;
    return;
  }
  out.values.resize(in.ints.size());
  for (size_t i = 0; i < in.ints.size(); ++i) {
    const int64_t v = in.ints[i];
    out.values[i] = out.dtype == DType::f64 ? static_cast<double>(v)
                                            : static_cast<double>(static_cast<float>(v));
  }
}

void eval_input(const Node& n, const HostTensor& given, HostTensor& out) {
  const std::string what = "interpret: input " + std::to_string(n.attrs.arg);
  if (given.dtype != n.dtype)
    throw DTypeError(what + ": expected dtype " + std::string(dtype_name(n.dtype)) + ", got " +
                     std::string(dtype_name(given.dtype)));
  if (given.shape != out.shape)
    throw ShapeError(what + ": expected shape " + dims_text(out.shape) + ", got " +
                     dims_text(given.shape));
  if (static_cast<int64_t>(given.values.size()) != given.numel())
    throw ShapeError(what + ": holds " + std::to_string(given.values.size()) +
                     " values for shape " + dims_text(given.shape));
  out.values = given.values;
  out.ints = given.ints;
}

void check_concrete(const Shape& s, const Node& n, const char* what) {
  if (!is_concrete(s))
    throw CompileError("interpreter: " + std::string(what) + " of " + std::string(op_name(n.op)) +
                       " has symbolic shape " + shape_str(s) +
                       "; the reference interpreter needs concrete shapes");
}

// HostTensor's rule: an integer tensor given with only one of `values` and `ints` has the other
// made from it (wrapped to its dtype), in `scratch`. Others are returned as they are.
const HostTensor* completed(const HostTensor* t, HostTensor& scratch) {
  if (!t || !holds_ints(t->dtype)) return t;
  const size_t n = static_cast<size_t>(t->numel());
  const bool has_ints = t->ints.size() == n, has_values = t->values.size() == n;
  if (has_ints == has_values) return t;  // both (or neither: reported by the caller)
  scratch = *t;
  if (has_values) {
    scratch.ints.resize(n);
    for (size_t i = 0; i < n; ++i) scratch.ints[i] = round_to_int_dtype(t->values[i], t->dtype);
  }
  scratch.values.resize(n);
  for (size_t i = 0; i < n; ++i) scratch.values[i] = static_cast<double>(scratch.ints[i]);
  return &scratch;
}

// Rounds a node's result to its dtype per the header comment's rule. An integer result computed
// on doubles (a float compared, cast or pow'd) is truncated and wrapped; every integer result
// gets its `values` from its exact `ints`.
void round_result(const Node& n, HostTensor& out) {
  if (holds_ints(n.dtype)) {
    if (static_cast<int64_t>(out.ints.size()) != out.numel()) {
      out.ints.resize(out.values.size());
      for (size_t i = 0; i < out.values.size(); ++i)
        out.ints[i] = round_to_int_dtype(out.values[i], n.dtype);
    }
    out.values.resize(out.ints.size());
    for (size_t i = 0; i < out.ints.size(); ++i) {
      out.ints[i] = wrap_to_dtype(out.ints[i], n.dtype);
      out.values[i] = static_cast<double>(out.ints[i]);
    }
    return;
  }
  const bool rounds = n.dtype == DType::f32 ||
                      ((n.dtype == DType::f16 || n.dtype == DType::bf16) && n.op == Op::Cast);
  if (rounds)
    for (double& v : out.values) v = round_to_dtype(v, n.dtype);
}

}  // namespace

HostTensor eval_node(const Node& n, const std::vector<const HostTensor*>& given) {
  check_concrete(n.shape, n, "the result");
  HostTensor out;
  out.dtype = n.dtype;
  out.shape = concrete_dims(n.shape);
  std::vector<HostTensor> scratch(given.size());
  std::vector<const HostTensor*> in(given.size());
  for (size_t i = 0; i < given.size(); ++i) in[i] = completed(given[i], scratch[i]);

  if (n.op == Op::Input) {
    KILN_CHECK(in.size() == 1 && in[0]) << "interpreter: an input node takes its given value";
    eval_input(n, *in[0], out);
  } else {
    KILN_CHECK(in.size() == n.inputs.size()) << "interpreter: " << op_name(n.op) << " expects "
                                             << n.inputs.size() << " inputs, got " << in.size();
    for (size_t i = 0; i < in.size(); ++i) {
      check_concrete(n.inputs[i]->shape, n, "an input");
      KILN_CHECK(in[i] && in[i]->shape == concrete_dims(n.inputs[i]->shape) &&
                 static_cast<int64_t>(in[i]->values.size()) == in[i]->numel())
          << "interpreter: input " << i << " of " << op_name(n.op) << " has shape "
          << (in[i] ? dims_text(in[i]->shape) : "null") << ", expected "
          << shape_str(n.inputs[i]->shape);
    }
    switch (op_kind(n.op)) {
      case OpKind::leaf: {  // Constant
        const size_t count = static_cast<size_t>(out.numel());
        if (holds_ints(n.dtype)) {
          out.ints.resize(count);
          for (size_t i = 0; i < count; ++i) out.ints[i] = n.constant_int_at(i);
        } else {
          out.values.resize(count);
          for (size_t i = 0; i < count; ++i) out.values[i] = n.constant_at(i);
        }
        break;
      }
      case OpKind::unary:
        eval_unary(n.op, *in[0], out);
        break;
      case OpKind::binary:
        eval_binary(n.op, *in[0], *in[1], out);
        break;
      case OpKind::ternary: {  // Where
        const HostTensor &c = *in[0], &a = *in[1], &b = *in[2];
        with_element_type(out, [&](auto t) {
          auto& o = elements(out, t);
          o.resize(c.ints.size());
          for (size_t i = 0; i < c.ints.size(); ++i)
            o[i] = c.ints[i] != 0 ? elements(a, t)[i] : elements(b, t)[i];
        });
        break;
      }
      case OpKind::cast:
        eval_cast(*in[0], out);
        break;
      case OpKind::view:
        switch (n.op) {
          case Op::Expand:
            eval_expand(*in[0], out);
            break;
          case Op::Reshape:
            out.values = in[0]->values;
            out.ints = in[0]->ints;
            break;
          case Op::Permute:
            eval_permute(n, *in[0], out);
            break;
          case Op::Slice:
            eval_slice(n, *in[0], out);
            break;
          default:
            KILN_CHECK(false) << "interpreter: unhandled view op " << op_name(n.op);
        }
        break;
      case OpKind::reduce:
        eval_reduce(n, *in[0], out);
        break;
      case OpKind::contraction:
        if (n.op == Op::MatMul)
          eval_matmul(*in[0], *in[1], out);
        else
          eval_conv2d(n, *in[0], *in[1], out);
        break;
      case OpKind::concat:
        eval_concat(n, in, out);
        break;
    }
  }
  round_result(n, out);
  KILN_CHECK(static_cast<int64_t>(out.values.size()) == out.numel())
      << "interpreter: " << op_name(n.op) << " produced " << out.values.size()
      << " values for shape " << dims_text(out.shape);
  return out;
}

std::vector<HostTensor> interpret(const Graph& g, const std::vector<HostTensor>& inputs) {
  if (inputs.size() != g.inputs.size())
    throw ShapeError("interpret: the graph takes " + std::to_string(g.inputs.size()) +
                     " inputs, got " + std::to_string(inputs.size()));
  const std::vector<NodePtr> order = g.topo_order();
  std::unordered_map<const Node*, size_t> index;
  index.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) index.emplace(order[i].get(), i);

  // Remaining uses of each value, so intermediates are freed as soon as their last user ran.
  std::vector<int64_t> uses(order.size(), 0);
  for (const NodePtr& n : order)
    for (const NodePtr& x : n->inputs) ++uses[index.at(x.get())];
  for (const NodePtr& out : g.outputs) uses[index.at(out.get())] += 1 << 30;  // never freed

  std::vector<HostTensor> values(order.size());
  std::vector<const HostTensor*> args;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = *order[i];
    args.clear();
    if (n.op == Op::Input) {
      if (n.attrs.arg < 0 || n.attrs.arg >= static_cast<int64_t>(inputs.size()))
        throw ShapeError("interpret: input node " + std::to_string(n.attrs.arg) +
                         " has no value (the graph was given " + std::to_string(inputs.size()) +
                         " inputs)");
      args.push_back(&inputs[n.attrs.arg]);
    } else {
      for (const NodePtr& x : n.inputs) args.push_back(&values[index.at(x.get())]);
    }
    values[i] = eval_node(n, args);
    for (const NodePtr& x : n.inputs) {
      const size_t j = index.at(x.get());
      if (--uses[j] == 0) values[j] = HostTensor{};
    }
  }

  std::vector<HostTensor> outs;
  outs.reserve(g.outputs.size());
  for (const NodePtr& out : g.outputs) {
    HostTensor t = values[index.at(out.get())];
    if (!holds_ints(t.dtype))  // integers are wrapped after every op
      for (double& v : t.values) v = round_to_dtype(v, t.dtype);
    outs.push_back(std::move(t));
  }
  return outs;
}

}  // namespace kiln::ir
