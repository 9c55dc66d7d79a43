// The reference interpreter: every op of ops.def evaluated in plain C++ on doubles, with the
// rounding rule below. Strided walks use precomputed strides and one odometer per tensor, so the
// cost is O(output * reduction) and nothing is allocated per element.
//
// Rounding rule (what makes the oracle agree with kiln's kernels):
//   - After every op, the result is rounded to the node's dtype when that dtype is an integer
//     (wrap like two's complement: int8 wraps mod 256, ...), bool (v != 0) or float32 (round to
//     nearest even). float64 needs no rounding.
//   - float16 and bfloat16 results are NOT rounded between ops: kiln computes such values in
//     float32 across a fused chain and rounds only when it stores them, so the oracle keeps them
//     exact (in double). The exceptions are Cast nodes (a Cast to f16/bf16 rounds, as the
//     conversion instruction does) and the graph outputs, which `interpret` rounds to their dtype.
//   - Float -> integer conversion truncates toward zero, then wraps; NaN and +-inf give 0 (C++ and
//     numpy leave those undefined; the oracle picks 0 so that it stays deterministic).
#include "ir/interpreter.h"

#include <kiln/errors.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>

#include "support/check.h"
#include "support/half.h"

namespace kiln::ir {

namespace {

constexpr double kTwoTo63 = 9223372036854775808.0;
constexpr double kTwoTo64 = 18446744073709551616.0;
// Doubles at or above this magnitude round to inf in float32 (the tie between FLT_MAX and 2^128).
constexpr double kF32Overflow = 340282356779733661637539395458142568448.0;  // 2^128 - 2^103

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

int64_t product(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Truncates toward zero and wraps modulo 2^64 (NaN and inf give 0).
int64_t wrap_to_i64(double v) {
  if (!std::isfinite(v)) return 0;
  const double t = std::trunc(v);
  if (t >= -kTwoTo63 && t < kTwoTo63) return static_cast<int64_t>(t);
  const double m = std::fmod(t, kTwoTo64);  // exact, |m| < 2^64
  uint64_t u = static_cast<uint64_t>(std::fabs(m));
  if (m < 0) u = 0 - u;
  return static_cast<int64_t>(u);  // modular since C++20
}

// Visits, in row-major order over `dims`, the offsets base + sum(idx[i] * strides[i]).
template <typename F>
void for_each_offset(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                     int64_t base, F&& f) {
  const int64_t n = static_cast<int64_t>(dims.size());
  for (int64_t d : dims)
    if (d == 0) return;
  if (n == 0) {
    f(base);
    return;
  }
  std::vector<int64_t> idx(n, 0);
  const int64_t inner = dims[n - 1], inner_stride = strides[n - 1];
  int64_t off = base;
  for (;;) {
    for (int64_t i = 0; i < inner; ++i) f(off + i * inner_stride);
    int64_t d = n - 2;
    for (; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < dims[d]) break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// out.values[k] = in.values[offset k], offsets walked over out.shape with the given strides.
void gather(const HostTensor& in, HostTensor& out, const std::vector<int64_t>& strides,
            int64_t base) {
  out.values.resize(static_cast<size_t>(out.numel()));
  double* o = out.values.data();
  const double* src = in.values.data();
  for_each_offset(out.shape, strides, base, [&](int64_t off) { *o++ = src[off]; });
}

template <typename F>
void map1(const HostTensor& a, HostTensor& out, F f) {
  const size_t n = a.values.size();
  out.values.resize(n);
  for (size_t i = 0; i < n; ++i) out.values[i] = f(a.values[i]);
}

template <typename F>
void map2(const HostTensor& a, const HostTensor& b, HostTensor& out, F f) {
  const size_t n = a.values.size();
  out.values.resize(n);
  for (size_t i = 0; i < n; ++i) out.values[i] = f(a.values[i], b.values[i]);
}

void eval_unary(Op op, const HostTensor& a, HostTensor& out) {
  switch (op) {
    case Op::Neg:
      return map1(a, out, [](double x) { return -x; });
    case Op::Abs:
      return map1(a, out, [](double x) { return std::fabs(x); });
    case Op::Exp:
      return map1(a, out, [](double x) { return std::exp(x); });
    case Op::Log:
      return map1(a, out, [](double x) { return std::log(x); });
    case Op::Sqrt:
      return map1(a, out, [](double x) { return std::sqrt(x); });
    case Op::Rsqrt:
      return map1(a, out, [](double x) { return 1.0 / std::sqrt(x); });
    case Op::Tanh:
      return map1(a, out, [](double x) { return std::tanh(x); });
    case Op::Sigmoid:
      return map1(a, out, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
    case Op::Relu:
      return map1(a, out, [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); });
    case Op::Erf:
      return map1(a, out, [](double x) { return std::erf(x); });
    case Op::Square:
      return map1(a, out, [](double x) { return x * x; });
    case Op::Not:
      return map1(a, out, [](double x) { return x == 0 ? 1.0 : 0.0; });
    default:
      break;
  }
  KILN_CHECK(false) << "interpreter: unhandled unary op " << op_name(op);
}

void eval_binary(Op op, const HostTensor& a, const HostTensor& b, HostTensor& out) {
  auto b2d = [](bool c) { return c ? 1.0 : 0.0; };
  switch (op) {
    case Op::Add:
      return map2(a, b, out, [](double x, double y) { return x + y; });
    case Op::Sub:
      return map2(a, b, out, [](double x, double y) { return x - y; });
    case Op::Mul:
      return map2(a, b, out, [](double x, double y) { return x * y; });
    case Op::Div:
      return map2(a, b, out, [](double x, double y) { return x / y; });
    case Op::Pow:
      return map2(a, b, out, [](double x, double y) { return std::pow(x, y); });
    case Op::Maximum:
      return map2(a, b, out, [](double x, double y) {
        return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                              : (x > y ? x : y);
      });
    case Op::Minimum:
      return map2(a, b, out, [](double x, double y) {
        return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                              : (x < y ? x : y);
      });
    case Op::Lt:
      return map2(a, b, out, [&](double x, double y) { return b2d(x < y); });
    case Op::Le:
      return map2(a, b, out, [&](double x, double y) { return b2d(x <= y); });
    case Op::Gt:
      return map2(a, b, out, [&](double x, double y) { return b2d(x > y); });
    case Op::Ge:
      return map2(a, b, out, [&](double x, double y) { return b2d(x >= y); });
    case Op::Eq:
      return map2(a, b, out, [&](double x, double y) { return b2d(x == y); });
    case Op::Ne:
      return map2(a, b, out, [&](double x, double y) { return b2d(x != y); });
    case Op::And:
      return map2(a, b, out, [&](double x, double y) { return b2d(x != 0 && y != 0); });
    case Op::Or:
      return map2(a, b, out, [&](double x, double y) { return b2d(x != 0 || y != 0); });
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

void eval_reduce(const Node& n, const HostTensor& in, HostTensor& out) {
  const std::vector<int64_t> in_strides = row_major_strides(in.shape);
  std::vector<int64_t> red_dims(in.shape.size(), 1);
  for (int64_t ax : n.attrs.axes) red_dims[ax] = in.shape[ax];
  const int64_t count = product(red_dims);
  KILN_CHECK(count > 0 || n.op == Op::ReduceSum || n.op == Op::ReduceMean)
      << "interpreter: " << op_name(n.op) << " over a zero-size axis has no identity";
  // Offsets of one reduction window, relative to its first element (computed once).
  std::vector<int64_t> window;
  window.reserve(static_cast<size_t>(count));
  for_each_offset(red_dims, in_strides, 0, [&](int64_t off) { window.push_back(off); });

  out.values.resize(static_cast<size_t>(out.numel()));
  double* o = out.values.data();
  const double* src = in.values.data();
  const Op op = n.op;
  for_each_offset(out.shape, in_strides, 0, [&](int64_t base) {
    const double* p = src + base;
    double acc;
    if (op == Op::ReduceSum || op == Op::ReduceMean) {
      acc = 0;
      for (int64_t w : window) acc += p[w];
      if (op == Op::ReduceMean)
        acc = count == 0 ? std::numeric_limits<double>::quiet_NaN() : acc / count;
    } else {
      const bool is_max = op == Op::ReduceMax;
      acc = p[window[0]];
      for (size_t i = 1; i < window.size() && !std::isnan(acc); ++i) {
        const double x = p[window[i]];
        if (std::isnan(x) || (is_max ? x > acc : x < acc)) acc = x;
      }
    }
    *o++ = acc;
  });
}

// A [..., M, K] x B [..., K, N], equal batch dims, accumulated in double. The i-k-j loop order
// keeps rows in cache and still adds each output's terms in k order.
void eval_matmul(const HostTensor& a, const HostTensor& b, HostTensor& out) {
  const size_t r = a.shape.size();
  const int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  const int64_t batch = product(std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2));
  out.values.assign(static_cast<size_t>(out.numel()), 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* pa = a.values.data() + bi * m * k;
    const double* pb = b.values.data() + bi * k * n;
    double* po = out.values.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      double* orow = po + i * n;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double av = pa[i * k + kk];
        const double* brow = pb + kk * n;
        for (int64_t j = 0; j < n; ++j) orow[j] += av * brow[j];
      }
    }
  }
}

// x [N, C, H, W] (*) w [O, C/groups, KH, KW] -> [N, O, OH, OW], zero padding.
void eval_conv2d(const Node& node, const HostTensor& x, const HostTensor& w, HostTensor& out) {
  const Conv2dParams& p = node.attrs.conv;
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t o = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = out.shape[2], ow = out.shape[3];
  const int64_t og = o / p.groups;
  out.values.resize(static_cast<size_t>(out.numel()));
  double* po = out.values.data();
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t oi = 0; oi < o; ++oi) {
      const int64_t c0 = (oi / og) * cg;
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = 0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            const double* px = x.values.data() + (ni * c + c0 + ci) * h * wd;
            const double* pw = w.values.data() + (oi * cg + ci) * kh * kw;
            for (int64_t ky = 0; ky < kh; ++ky) {
              const int64_t iy = y * p.stride[0] - p.padding[0] + ky * p.dilation[0];
              if (iy < 0 || iy >= h) continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t ix = xo * p.stride[1] - p.padding[1] + kx * p.dilation[1];
                if (ix < 0 || ix >= wd) continue;
                acc += px[iy * wd + ix] * pw[ky * kw + kx];
              }
            }
          }
          *po++ = acc;
        }
    }
}

void eval_concat(const Node& n, const std::vector<const HostTensor*>& in, HostTensor& out) {
  const int64_t axis = n.attrs.axis;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out.shape[d];
  for (size_t d = axis + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  out.values.resize(static_cast<size_t>(out.numel()));
  double* o = out.values.data();
  for (int64_t i = 0; i < outer; ++i)
    for (const HostTensor* t : in) {
      const int64_t chunk = t->shape[axis] * inner;
      const double* src = t->values.data() + i * chunk;
      o = std::copy(src, src + chunk, o);
    }
}

void eval_input(const Node& n, const HostTensor& given, HostTensor& out) {
  const std::string what = "interpret: input " + std::to_string(n.attrs.arg);
  if (given.dtype != n.dtype)
    throw DTypeError(what + ": expected dtype " + std::string(dtype_name(n.dtype)) + ", got " +
                     std::string(dtype_name(given.dtype)));
  if (given.shape != out.shape)
    throw ShapeError(what + ": expected shape " + dims_str(out.shape) + ", got " +
                     dims_str(given.shape));
  if (static_cast<int64_t>(given.values.size()) != given.numel())
    throw ShapeError(what + ": holds " + std::to_string(given.values.size()) +
                     " values for shape " + dims_str(given.shape));
  out.values = given.values;
}

// The rounding rule of the header comment: which results are rounded to their dtype.
bool rounds_result(Op op, DType t) {
  switch (t) {
    case DType::f64:
      return false;
    case DType::f16:
    case DType::bf16:
      return op == Op::Cast;
    default:
      return true;
  }
}

void check_concrete(const Shape& s, const Node& n, const char* what) {
  if (!is_concrete(s))
    throw CompileError("interpreter: " + std::string(what) + " of " + std::string(op_name(n.op)) +
                       " has symbolic shape " + shape_str(s) +
                       "; the reference interpreter needs concrete shapes");
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

double decode_impl(DType t, const uint8_t* p) {
  switch (t) {
    case DType::f32:
      return load<float>(p);
    case DType::f64:
      return load<double>(p);
    case DType::f16:
      return f16_bits_to_float(load<uint16_t>(p));
    case DType::bf16:
      return bf16_bits_to_float(load<uint16_t>(p));
    case DType::i8:
      return load<int8_t>(p);
    case DType::i32:
      return load<int32_t>(p);
    case DType::i64:
      return static_cast<double>(load<int64_t>(p));
    case DType::boolean:
      return *p != 0 ? 1.0 : 0.0;
  }
  return 0;
}

void encode_impl(DType t, double v, uint8_t* p) {
  switch (t) {
    case DType::f32:
      return store(p, static_cast<float>(round_to_dtype(v, DType::f32)));
    case DType::f64:
      return store(p, v);
    case DType::f16:
      return store(p, double_to_f16_bits(v));
    case DType::bf16:
      return store(p, double_to_bf16_bits(v));
    case DType::i8:
      return store(p, static_cast<int8_t>(wrap_to_i64(v)));
    case DType::i32:
      return store(p, static_cast<int32_t>(wrap_to_i64(v)));
    case DType::i64:
      return store(p, wrap_to_i64(v));
    case DType::boolean:
      *p = v != 0 ? 1 : 0;
      return;
  }
}

}  // namespace

double decode_element(DType dtype, const void* p) {
  return decode_impl(dtype, static_cast<const uint8_t*>(p));
}
void encode_element(DType dtype, double v, void* p) {
  encode_impl(dtype, v, static_cast<uint8_t*>(p));
}

int64_t HostTensor::numel() const { return product(shape); }

HostTensor HostTensor::from_array(const Array& a) {
  HostTensor t;
  t.dtype = a.dtype();
  t.shape = a.shape();
  t.values.resize(static_cast<size_t>(t.numel()));
  const DType dt = a.dtype();
  const int64_t esize = static_cast<int64_t>(dtype_size(dt));
  const uint8_t* base = static_cast<const uint8_t*>(a.data());
  double* o = t.values.data();
  // Strides are in elements and may be negative or zero; offsets are relative to data().
  for_each_offset(a.shape(), a.strides(), 0,
                  [&](int64_t off) { *o++ = decode_impl(dt, base + off * esize); });
  return t;
}

void HostTensor::to_array(Array& out) const {
  if (out.dtype() != dtype)
    throw DTypeError("HostTensor::to_array: expected an array of dtype " +
                     std::string(dtype_name(dtype)) + ", got " +
                     std::string(dtype_name(out.dtype())));
  if (out.shape() != shape)
    throw ShapeError("HostTensor::to_array: expected an array of shape " + dims_str(shape) +
                     ", got " + dims_str(out.shape()));
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  uint8_t* base = static_cast<uint8_t*>(out.data());
  const double* v = values.data();
  for_each_offset(shape, out.strides(), 0,
                  [&](int64_t off) { encode_impl(dtype, *v++, base + off * esize); });
}

double round_to_dtype(double v, DType dtype) {
  switch (dtype) {
    case DType::f64:
      return v;
    case DType::f32: {
      if (std::isnan(v)) return v;
      if (std::fabs(v) >= kF32Overflow)
        return std::copysign(std::numeric_limits<double>::infinity(), v);
      return static_cast<double>(static_cast<float>(v));
    }
    case DType::f16:
      return round_to_f16(v);
    case DType::bf16:
      return round_to_bf16(v);
    case DType::i8:
      return static_cast<int8_t>(wrap_to_i64(v));
    case DType::i32:
      return static_cast<int32_t>(wrap_to_i64(v));
    case DType::i64:
      return static_cast<double>(wrap_to_i64(v));
    case DType::boolean:
      return v != 0 ? 1.0 : 0.0;
  }
  return v;
}

HostTensor eval_node(const Node& n, const std::vector<const HostTensor*>& in) {
  check_concrete(n.shape, n, "the result");
  HostTensor out;
  out.dtype = n.dtype;
  out.shape = concrete_dims(n.shape);

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
          << (in[i] ? dims_str(in[i]->shape) : "null") << ", expected "
          << shape_str(n.inputs[i]->shape);
    }
    switch (op_kind(n.op)) {
      case OpKind::leaf: {  // Constant
        out.values.resize(static_cast<size_t>(out.numel()));
        for (int64_t i = 0; i < out.numel(); ++i) out.values[i] = n.constant_at(i);
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
        out.values.resize(c.values.size());
        for (size_t i = 0; i < c.values.size(); ++i)
          out.values[i] = c.values[i] != 0 ? a.values[i] : b.values[i];
        break;
      }
      case OpKind::cast:
        out.values = in[0]->values;
        break;  // the rounding below converts
      case OpKind::view:
        switch (n.op) {
          case Op::Expand:
            eval_expand(*in[0], out);
            break;
          case Op::Reshape:
            out.values = in[0]->values;
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
  KILN_CHECK(static_cast<int64_t>(out.values.size()) == out.numel())
      << "interpreter: " << op_name(n.op) << " produced " << out.values.size()
      << " values for shape " << dims_str(out.shape);
  if (rounds_result(n.op, n.dtype))
    for (double& v : out.values) v = round_to_dtype(v, n.dtype);
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
    for (double& v : t.values) v = round_to_dtype(v, t.dtype);
    outs.push_back(std::move(t));
  }
  return outs;
}

}  // namespace kiln::ir
