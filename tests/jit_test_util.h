// Helpers of the JIT differential tests: seeded random arrays in any layout (strided, transposed,
// offset, negative and zero strides) whose memory is shared by the kiln::Array given to the JIT and
// the HostTensor given to the reference interpreter, CONVENTIONS.md tolerances, and
// check_against_reference(fn, inputs), which traces `fn` itself, interprets it and compares.
#pragma once

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/passes/passes.h"
#include "support/half.h"

#include <kiln/kiln.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace jt {

using kiln::Array;
using kiln::DType;
using kiln::ir::HostTensor;
using Rng = std::mt19937_64;

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i8,  DType::i32, DType::i64, DType::boolean};
  return v;
}
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v = {DType::f32, DType::f64, DType::f16, DType::bf16};
  return v;
}
inline const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> v = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i8,  DType::i32, DType::i64};
  return v;
}
inline std::string dt(DType t) { return std::string(kiln::dtype_name(t)); }
// A case's name in failure messages: what it checks, its dtype and its seed.
inline std::string label(const std::string& what, DType t, uint64_t seed) {
  return what + " dtype " + dt(t) + " seed " + std::to_string(seed);
}

inline std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

inline int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
inline double uniform_real(Rng& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
template <typename T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(v.size()) - 1))];
}
// A dim from the "interesting" sizes: 1, odd sizes and a few round ones (0 only when asked).
inline int64_t random_dim(Rng& rng, bool allow_zero = false, int64_t max = 33) {
  static const std::vector<int64_t> sizes = {1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 33, 64, 130};
  if (allow_zero && uniform_int(rng, 0, 15) == 0) return 0;
  int64_t d;
  do d = pick(rng, sizes);
  while (d > max);
  return d;
}
inline std::vector<int64_t> random_shape(Rng& rng, int min_rank, int max_rank,
                                         bool allow_zero = false, int64_t max_dim = 33) {
  std::vector<int64_t> s(static_cast<size_t>(uniform_int(rng, min_rank, max_rank)));
  for (auto& d : s) d = random_dim(rng, allow_zero, max_dim);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Element access by dtype.

inline void store_value(void* p, DType t, double v) {
  switch (t) {
    case DType::f32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::f64:
      std::memcpy(p, &v, 8);
      return;
    case DType::f16: {
      uint16_t h = kiln::double_to_f16_bits(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::bf16: {
      uint16_t h = kiln::double_to_bf16_bits(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::i8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(p, &x, 1);
      return;
    }
    case DType::i32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case DType::i64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case DType::boolean: {
      uint8_t x = v != 0 ? 1 : 0;
      std::memcpy(p, &x, 1);
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Random values.

enum class Values : uint8_t {
  normal,    // floats in [-2, 2], ints small and signed, bools 0/1
  positive,  // floats in [0.25, 2.5], ints in [1, 9]: for log, sqrt, rsqrt, pow bases, divisors
  wide,      // floats in [-8, 8], ints in [-100, 100] (int8: full range, to test wrap)
};

inline double random_value(Rng& rng, DType t, Values v) {
  switch (t) {
    case DType::boolean:
      return static_cast<double>(uniform_int(rng, 0, 1));
    case DType::i8:
      if (v == Values::positive) return static_cast<double>(uniform_int(rng, 1, 9));
      if (v == Values::wide) return static_cast<double>(uniform_int(rng, -128, 127));
      return static_cast<double>(uniform_int(rng, -9, 9));
    case DType::i32:
    case DType::i64:
      if (v == Values::positive) return static_cast<double>(uniform_int(rng, 1, 9));
      if (v == Values::wide) return static_cast<double>(uniform_int(rng, -100, 100));
      return static_cast<double>(uniform_int(rng, -20, 20));
    default:
      if (v == Values::positive) return uniform_real(rng, 0.25, 2.5);
      if (v == Values::wide) return uniform_real(rng, -8, 8);
      return uniform_real(rng, -2, 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Arrays in any layout. The buffer is bigger than the view when the layout has gaps; the elements
// outside the view hold a sentinel (777 / 99 / true) so that a kernel reading them shows up.

enum class Layout : uint8_t {
  contiguous,
  strided,      // every 2nd element of the last dim, every 3rd row of the first
  transposed,   // stored with the dims in reverse order (Fortran order)
  offset,       // a sub-block starting at (1, 2, 1, ...) of a padded buffer (not 64-byte aligned)
  negative,     // first and last dims walked backwards (negative strides)
  zero_stride,  // one dim of extent > 1 with stride 0 (a numpy broadcast view)
  mixed,        // a random combination of the above
};
inline const std::vector<Layout>& all_layouts() {
  static const std::vector<Layout> v = {Layout::contiguous, Layout::strided,  Layout::transposed,
                                        Layout::offset,     Layout::negative, Layout::zero_stride,
                                        Layout::mixed};
  return v;
}
// The i-th of all_layouts(), cycling: a case's next layout.
inline Layout layout_n(size_t i) { return all_layouts()[i % all_layouts().size()]; }
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::strided:
      return "strided";
    case Layout::transposed:
      return "transposed";
    case Layout::offset:
      return "offset";
    case Layout::negative:
      return "negative";
    case Layout::zero_stride:
      return "zero_stride";
    case Layout::mixed:
      return "mixed";
  }
  return "?";
}

struct TestArray {
  std::shared_ptr<uint8_t[]> storage;  // keeps the buffer alive (64-byte aligned start)
  Array array;                         // the view given to kiln and to HostTensor::from_array
  Layout layout = Layout::contiguous;

  std::string describe() const {
    return dt(array.dtype()) + dims_str(array.shape()) + " strides " + dims_str(array.strides()) +
           " (" + layout_name(layout) + ")";
  }
  HostTensor host() const { return HostTensor::from_array(array); }
};

namespace detail {
inline std::shared_ptr<uint8_t[]> aligned_buffer(size_t bytes) {
  bytes = std::max<size_t>((bytes + 63) / 64 * 64, 64);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  std::memset(p, 0, bytes);
  return std::shared_ptr<uint8_t[]>(p, [](uint8_t* q) { std::free(q); });
}
inline double sentinel(DType t) {
  if (t == DType::boolean) return 1;
  if (kiln::is_integer(t)) return 99;
  return 777;
}
}  // namespace detail

// A random array of `shape` and `dtype` laid out as `layout` (values from `v`).
inline TestArray make_array(Rng& rng, std::vector<int64_t> shape, DType dtype,
                            Layout layout = Layout::contiguous, Values v = Values::normal) {
  const size_t n = shape.size();
  std::vector<int64_t> step(n, 1), off(n, 0), pad(n, 0), perm(n);
  std::vector<bool> neg(n, false);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  auto apply = [&](Layout l) {
    if (n == 0) return;
    switch (l) {
      case Layout::contiguous:
      case Layout::mixed:
        break;
      case Layout::strided:
        step[n - 1] = 2;
        if (n > 1) step[0] = 3;
        break;
      case Layout::transposed:
        std::reverse(perm.begin(), perm.end());
        break;
      case Layout::offset:
        for (size_t i = 0; i < n; ++i) {
          off[i] = i % 2 == 0 ? 1 : 2;
          pad[i] = 1;
        }
        break;
      case Layout::negative:
        neg[0] = true;
        neg[n - 1] = true;
        break;
      case Layout::zero_stride: {
        // The first dim with extent > 1 (or none) gets stride 0.
        for (size_t i = 0; i < n; ++i)
          if (shape[i] > 1) {
            step[i] = 0;
            break;
          }
        break;
      }
    }
  };
  if (layout == Layout::mixed) {
    for (Layout l : {Layout::strided, Layout::transposed, Layout::offset, Layout::negative})
      if (uniform_int(rng, 0, 1)) apply(l);
    if (n > 1) std::shuffle(perm.begin(), perm.end(), rng);
  } else {
    apply(layout);
  }
  // Physical extents and strides (row-major over `perm` order).
  std::vector<int64_t> phys(n), pstride(n);
  for (size_t i = 0; i < n; ++i)
    phys[i] = off[i] + std::max<int64_t>(shape[i] - 1, 0) * step[i] + 1 + pad[i];
  int64_t acc = 1;
  for (size_t k = n; k-- > 0;) {
    pstride[perm[k]] = acc;
    acc *= phys[perm[k]];
  }
  const size_t esize = kiln::dtype_size(dtype);
  TestArray t;
  t.layout = layout;
  t.storage = detail::aligned_buffer(static_cast<size_t>(acc) * esize);
  for (int64_t i = 0; i < acc; ++i)
    store_value(t.storage.get() + i * esize, dtype, detail::sentinel(dtype));
  int64_t base = 0;
  std::vector<int64_t> strides(n);
  for (size_t i = 0; i < n; ++i) {
    base += (off[i] + (neg[i] ? std::max<int64_t>(shape[i] - 1, 0) * step[i] : 0)) * pstride[i];
    strides[i] = (neg[i] ? -1 : 1) * step[i] * pstride[i];
  }
  uint8_t* data = t.storage.get() + base * static_cast<int64_t>(esize);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  // Fill the view in row-major order (a stride-0 dim is written repeatedly: the last write wins,
  // and the reference reads it back from memory anyway).
  std::vector<int64_t> idx(n, 0);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t o = 0;
    for (size_t i = 0; i < n; ++i) o += idx[i] * strides[i];
    store_value(data + o * static_cast<int64_t>(esize), dtype, random_value(rng, dtype, v));
    for (size_t i = n; i-- > 0;) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  t.array = Array::view(data, std::move(shape), dtype, std::move(strides));
  return t;
}

// An array holding given values (row-major), contiguous.
inline TestArray make_array_from(std::vector<int64_t> shape, DType dtype,
                                 const std::vector<double>& vals) {
  Rng rng(0);
  TestArray t = make_array(rng, shape, dtype);
  const size_t esize = kiln::dtype_size(dtype);
  for (size_t i = 0; i < vals.size(); ++i)
    store_value(static_cast<uint8_t*>(t.array.data()) + i * esize, dtype, vals[i]);
  return t;
}

inline std::vector<Array> arrays_of(const std::vector<TestArray>& ts) {
  std::vector<Array> v;
  for (const auto& t : ts) v.push_back(t.array);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Tolerances (CONVENTIONS.md). `scale` widens them for reductions and matmul (~K or sqrt(K)).

struct Tol {
  double rtol = 0, atol = 0;
};
inline Tol tol_for(DType t, double scale = 1) {
  switch (t) {
    case DType::f32:
      return {1.3e-6 * scale, 1e-5 * scale};
    case DType::f64:
      return {1e-12 * scale, 1e-12 * scale};
    // float16 has 11 significant bits: one rounding step (what separates "computed in float32 and
    // rounded once at the store" from the double-precision oracle rounded once) is up to 2^-10
    // = 9.8e-4 relative, right at CONVENTIONS' 1e-3; 2e-3 allows that one step with margin.
    case DType::f16:
      return {2e-3 * scale, 1e-5 * scale};
    case DType::bf16:
      return {1.6e-2 * scale, 1e-5 * scale};
    default:
      return {0, 0};
  }
}

inline std::vector<int64_t> unravel(int64_t k, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return idx;
    idx[i] = k % shape[i];
    k /= shape[i];
  }
  return idx;
}

// Compares `got` with `want` (dtype, shape, then values; NaN equals NaN, ints and bools exact).
// Reports the first mismatches with their indices; returns true when they match.
inline bool assert_close(const Array& got, const HostTensor& want, Tol tol,
                         const std::string& context = "") {
  std::ostringstream msg;
  msg << context;
  if (got.dtype() != want.dtype) {
    msg << "\ndtype mismatch: got " << dt(got.dtype()) << ", want " << dt(want.dtype);
    FAIL_CHECK(msg.str());
    return false;
  }
  if (got.shape() != want.shape) {
    msg << "\nshape mismatch: got " << dims_str(got.shape()) << ", want " << dims_str(want.shape);
    FAIL_CHECK(msg.str());
    return false;
  }
  HostTensor g = HostTensor::from_array(got);
  const bool exact = !kiln::is_floating(want.dtype);
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < want.values.size(); ++i) {
    double a = g.values[i], b = want.values[i];
    bool ok;
    const bool ints = exact && want.ints.size() == want.values.size();
    if (ints)  // int64s past 2^53 have no double
      ok = g.ints[i] == want.ints[i];
    else if (std::isnan(a) || std::isnan(b))
      ok = std::isnan(a) && std::isnan(b);
    else if (exact || std::isinf(b))
      ok = a == b;
    else
      ok = std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
    if (!ok) {
      if (bad < 10) {
        msg << "\n  at " << dims_str(unravel(static_cast<int64_t>(i), want.shape)) << ": got ";
        if (ints)
          msg << g.ints[i] << ", want " << want.ints[i];
        else
          msg << a << ", want " << b << " (diff " << std::fabs(a - b) << ")";
      }
      if (std::isfinite(a) && std::isfinite(b)) worst = std::max(worst, std::fabs(a - b));
      ++bad;
    }
  }
  if (bad) {
    msg << "\n"
        << bad << " of " << want.values.size() << " elements differ (" << dt(want.dtype)
        << dims_str(want.shape) << ", rtol " << tol.rtol << " atol " << tol.atol
        << ", worst abs diff " << worst << ")";
    FAIL_CHECK(msg.str());
    return false;
  }
  SUCCEED();
  return true;
}
inline bool assert_close(const Array& got, const HostTensor& want, double scale = 1,
                         const std::string& context = "") {
  return assert_close(got, want, tol_for(want.dtype, scale), context);
}

// ---------------------------------------------------------------------------------------------
// The reference: trace `fn` into an ir::Graph here and run the interpreter on the inputs' memory.

// Traces a body (inputs in, outputs out) on the inputs' dtypes and shapes, as kiln::Function does.
inline kiln::ir::Graph trace_graph(const kiln::TraceFn& fn, const std::vector<Array>& inputs) {
  kiln::ir::Graph g;
  std::vector<kiln::Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto in = kiln::ir::make_input(static_cast<int64_t>(i), inputs[i].dtype(),
                                   kiln::ir::concrete_shape(inputs[i].shape()));
    g.inputs.push_back(in);
    args.emplace_back(in);
  }
  for (const kiln::Tensor& t : fn(args)) g.outputs.push_back(t.node());
  return g;
}

// The TraceFn kiln::jit builds for a callable of N kiln::Tensor arguments.
template <typename F>
kiln::TraceFn as_trace_fn(F fn) {
  constexpr int n = kiln::detail::FnTraits<std::decay_t<F>>::arity;
  return [fn = std::move(fn)](const std::vector<kiln::Tensor>& in) mutable {
    return kiln::detail::invoke(fn, in, std::make_index_sequence<n>{});
  };
}

template <typename F>
requires(!std::is_same_v<std::decay_t<F>, kiln::TraceFn>) kiln::ir::Graph
    trace_graph(F& fn, const std::vector<Array>& inputs) {
  constexpr int n = kiln::detail::FnTraits<std::decay_t<F>>::arity;
  REQUIRE(static_cast<int>(inputs.size()) == n);
  return trace_graph(as_trace_fn(fn), inputs);
}

inline std::vector<HostTensor> reference(const kiln::ir::Graph& g,
                                         const std::vector<Array>& inputs) {
  std::vector<HostTensor> hs;
  for (const Array& a : inputs) hs.push_back(HostTensor::from_array(a));
  return kiln::ir::interpret(g, hs);
}

struct CheckOptions {
  double tol_scale = 1;            // widen tolerances (reductions, matmul)
  std::string label;               // printed on failure (op, seed, ...)
  bool call_into_outputs = false;  // use f.call with caller-owned outputs instead of f(inputs)
  const kiln::Function* function = nullptr;  // reuse this Function instead of kiln::jit(fn)
  std::optional<Tol> tol =
      std::nullopt;  // for floating outputs: this instead of tol_for(dtype, tol_scale)
};

inline std::string describe_inputs(const std::vector<TestArray>& ins) {
  std::string s;
  for (size_t i = 0; i < ins.size(); ++i)
    s += "\n  arg " + std::to_string(i) + ": " + ins[i].describe();
  return s;
}

// Runs `f` on `inputs` and compares every output with the interpreter's run of `body` (the same
// body `f` was made from). Exceptions from kiln are reported as failures, not rethrown, so loops
// over many cases keep going.
inline bool check_traced(const kiln::TraceFn& body, const kiln::Function& f,
                         const std::vector<TestArray>& inputs, const CheckOptions& opt) {
  const std::vector<Array> arrays = arrays_of(inputs);
  kiln::ir::Graph g;
  try {
    g = trace_graph(body, arrays);
  } catch (const std::exception& e) {
    FAIL_CHECK(opt.label + describe_inputs(inputs) + "\ntracing threw: " + e.what());
    return false;
  }
  std::string context = opt.label + describe_inputs(inputs) + "\nprogram:\n" + kiln::ir::print(g);
  std::vector<HostTensor> want;
  try {
    want = reference(g, arrays);
  } catch (const std::exception& e) {
    FAIL_CHECK(context + "\nthe reference interpreter threw: " + e.what());
    return false;
  }
  std::vector<Array> got;
  try {
    if (opt.call_into_outputs) {
      for (const HostTensor& w : want) got.push_back(Array::empty(w.shape, w.dtype));
      f.call(arrays, got);
    } else {
      got = f(arrays);
    }
  } catch (const std::exception& e) {
    FAIL_CHECK(context + "\nkiln threw: " + e.what());
    return false;
  }
  if (got.size() != want.size()) {
    FAIL_CHECK(context + "\nkiln returned " + std::to_string(got.size()) + " outputs, want " +
               std::to_string(want.size()));
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i)
    ok = assert_close(got[i], want[i],
                      opt.tol && kiln::is_floating(want[i].dtype)
                          ? *opt.tol
                          : tol_for(want[i].dtype, opt.tol_scale),
                      context + (got.size() > 1 ? "\noutput " + std::to_string(i) : "")) &&
         ok;
  return ok;
}

// Runs `fn` through kiln::jit on `inputs` and compares every output with the interpreter's.
template <typename F>
bool check_against_reference(F fn, const std::vector<TestArray>& inputs, CheckOptions opt = {}) {
  constexpr int n = kiln::detail::FnTraits<std::decay_t<F>>::arity;
  REQUIRE(static_cast<int>(inputs.size()) == n);
  if (opt.function) return check_traced(as_trace_fn(fn), *opt.function, inputs, opt);
  return check_traced(as_trace_fn(fn), kiln::jit(fn), inputs, opt);
}

}  // namespace jt
