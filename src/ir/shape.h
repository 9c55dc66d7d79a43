// Dims and shapes. A dim is a concrete extent or a symbol (bound at run time); symbolic dims carry
// a name for printing and the facts a variant is specialized on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::ir {

struct Dim {
  int64_t value = 0;  // the extent when concrete
  int32_t sym = -1;   // symbol id when symbolic (value is then meaningless)

  static Dim concrete(int64_t v) { return Dim{v, -1}; }
  static Dim symbol(int32_t id) { return Dim{0, id}; }
  bool is_symbolic() const { return sym >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && sym == o.sym; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

using Shape = std::vector<Dim>;

Shape concrete_shape(const std::vector<int64_t>& dims);
std::vector<int64_t> concrete_dims(const Shape& s);  // symbolic dims give -1
bool is_concrete(const Shape& s);
int64_t numel(const Shape& s);  // requires a concrete shape
inline bool is_one(const Dim& d) { return !d.is_symbolic() && d.value == 1; }

// Symbolic dims (dynamic shapes). A variant binds each symbol to a run-time extent that its guards
// keep >= 2 (0 and 1 take exact variants, so a symbol never broadcasts and is never empty), and
// may also know the extent to be a multiple of kSymbolMultiple (the vector width in float32s).
inline constexpr int64_t kSymbolMultiple = 16;
struct SymbolFact {
  bool multiple = false;  // extent % kSymbolMultiple == 0
  bool operator==(const SymbolFact& o) const { return multiple == o.multiple; }
};
using SymbolFacts = std::vector<SymbolFact>;  // by symbol id

// The extent of `d` given the run-time extents of the symbols (dims[sym]).
inline int64_t dim_value(const Dim& d, const int64_t* dims) {
  return d.is_symbolic() ? dims[d.sym] : d.value;
}
int64_t numel(const Shape& s, const int64_t* dims);
std::vector<int64_t> resolve_dims(const Shape& s, const int64_t* dims);
// The product of the concrete dims, and the symbols (sorted), of a shape.
int64_t concrete_product(const Shape& s);

// The most dims a shape may have (numpy's limit, so every result converts to an array).
inline constexpr size_t kMaxDims = 64;
std::vector<int32_t> symbols_of(const Shape& s);
// Whether a reshape from `a` to `b` keeps the element count for every extent of the symbols:
// the same symbols, each a dim of its own, and the same product of the other dims (for concrete
// shapes: the same numel).
bool same_numel(const Shape& a, const Shape& b);
std::string shape_str(const Shape& s);
std::string dims_text(const std::vector<int64_t>& dims);  // "[2,3]"
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

// Whether reshaping `in` to `out` only inserts or drops size-1 dims (so indexing stays per dim);
// if so and `pairs` is given, it receives the (out dim, in dim) pairs of the other dims, in order.
bool is_unit_reshape(const Shape& out, const Shape& in,
                     std::vector<std::pair<size_t, size_t>>* pairs = nullptr);

// numpy broadcasting of two shapes; returns false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);

}  // namespace kiln::ir
