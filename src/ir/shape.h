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
std::string shape_str(const Shape& s);
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

// Whether reshaping `in` to `out` only inserts or drops size-1 dims (so indexing stays per dim);
// if so and `pairs` is given, it receives the (out dim, in dim) pairs of the other dims, in order.
bool is_unit_reshape(const Shape& out, const Shape& in,
                     std::vector<std::pair<size_t, size_t>>* pairs = nullptr);

// numpy broadcasting of two shapes; returns false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);

}  // namespace kiln::ir
