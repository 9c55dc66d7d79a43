// The per-trace state of kiln._kiln.JitFunction (jit.cpp): one Entry per arity, Python-scalar
// pattern and static values, each with its kiln::Function, the ranges its Python int arguments
// must keep, and the signatures it has compiled (whose outputs the extension then allocates).
#pragma once

#include "common.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::py {

// One kiln::Function: traced once for an arity, a Python-scalar pattern and static values.
struct Entry {
  size_t nargs = 0;
  uint64_t scalar_mask = 0;  // bit i: argument i was a Python number (weakly typed)
  nb::object static_key;     // None, or the tuple of static values
  std::vector<int> static_pos;
  nb::list static_values;
  bool single_output = true;  // false: the function returned a tuple or list
  std::unique_ptr<Function> fn;
  // Values a trace computed from its Python int arguments and cast to an integer dtype (numpy
  // raises OverflowError for int8_array + 300 and int8_array + 2 * 100, and takes 300 beside a
  // float32 array), checked at a call whose inputs have the dtypes that trace had; from every
  // trace of `fn` (kiln/_scalar_expr.py). One argument's m * s + c (s itself: m 1, c 0) is the
  // range [lo, hi] of s; any other value (s + t, s * t) is its expression, evaluated in Python,
  // and the range of its dtype.
  struct ScalarBound {
    size_t arg;
    int64_t lo, hi;
    std::string dtype;
    std::vector<DType> inputs;  // the dtypes of the traced inputs
    nb::object m, c;            // Python ints
    nb::object expr;            // None for m * s + c
    nb::object fast;            // expr's check of a call's arguments: True where it passes
  };
  std::vector<ScalarBound> scalar_bounds;
  uint64_t scalar_bounds_version = 0;  // counts the changes to scalar_bounds

  // Signatures this Function has already compiled, with the dtypes and shapes of their outputs
  // (kept under the GIL). A call whose inputs match one is a certain cache hit in kiln::Function
  // (its variants are never evicted), so the extension can allocate the outputs itself and call
  // Function::call, and may keep the GIL for small inputs without risking a compile under it.
  struct ArgKey {
    DType dtype;
    bool contiguous, aligned;
    std::vector<int64_t> shape;
  };
  struct OutKey {
    DType dtype;
    std::vector<int64_t> shape;
    size_t bytes;
  };
  struct Known {
    std::vector<ArgKey> in;
    std::vector<OutKey> out;
    size_t out_bytes = 0;
  };
  std::vector<Known> known;
  size_t last_known = 0;    // index of the last match (tried first)
  size_t next_replace = 0;  // round-robin slot once `known` is full
};

// How many signatures per traced function the extension remembers (kiln's default variant limit
// is 8); beyond this, calls still work, through the allocating path.
constexpr size_t kMaxKnown = 16;

// The signature of `in` if `e` has compiled it (the last match is tried first), else null.
const Entry::Known* find_known(Entry& e, std::span<const Array> in);
// Records that `e` compiled the signature of `in`, giving `outs`.
void remember(Entry& e, std::span<const Array> in, const std::vector<Array>& outs);
// Adds a trace's notes on its Python int arguments ((arg, lo, hi, dtype, m, c, expression, fast
// check) tuples from kiln._scalar_expr.notes) to e.scalar_bounds, for a trace of `inputs`; a
// narrower range replaces the one kept for the same argument, m, c, expression and input dtypes.
void add_scalar_bounds(Entry& e, nb::handle notes, const std::vector<Tensor>& inputs);
// JitFunction.stats(): the counts of every entry's Function, summed.
nb::dict stats_of(const std::vector<std::unique_ptr<Entry>>& entries);

}  // namespace kiln::py
