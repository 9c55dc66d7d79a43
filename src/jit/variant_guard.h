// A variant's guard: what a call must look like for a compiled variant to serve it. Per argument
// the dtype, the layout classes (contiguous, 64-byte aligned) and per dim either an exact extent or
// a symbol. Symbols bind to the call's extents; each must be >= 2 (0 and 1 take exact variants),
// equal wherever the symbol occurs (the relations the program relies on), and a multiple of
// kSymbolMultiple where the variant assumes it. Checked on every call in a few nanoseconds.
#pragma once

#include "ir/shape.h"

#include <kiln/array.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln {

struct ArgGuard {
  DType dtype = DType::f32;
  bool contiguous = true;
  bool aligned = true;
  ir::Shape dims;
  bool operator==(const ArgGuard& o) const {
    return dtype == o.dtype && contiguous == o.contiguous && aligned == o.aligned &&
           dims == o.dims;
  }
};

struct VariantGuard {
  std::vector<ArgGuard> args;
  ir::SymbolFacts facts;  // by symbol id; symbols are numbered in argument and dim order

  int num_symbols() const { return static_cast<int>(facts.size()); }
  bool is_exact() const { return facts.empty(); }
  // Checks the guard against a call; on success dims[s] holds symbol s's extent. `dims` has room
  // for num_symbols() values.
  bool bind(std::span<const Array> args, int64_t* dims) const;
  // How specialized it is: more exact dims, then more divisibility facts, rank higher.
  int64_t specificity() const;
  // Canonical text: "f32[s0,256] f32[256,1024]:strided; s0>=2%16".
  std::string str() const;
  bool operator==(const VariantGuard& o) const { return args == o.args && facts == o.facts; }
};

inline bool is_aligned64(const Array& a) {
  return (reinterpret_cast<uintptr_t>(a.data()) & 63) == 0;
}

}  // namespace kiln
