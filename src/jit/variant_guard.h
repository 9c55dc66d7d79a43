// A variant's guard: what a call must look like for a compiled variant to serve it. Per argument
// the dtype, the layout class (contiguous or strided) and per dim either an exact extent or a
// symbol. Symbols bind to the call's extents; each must be >= 2 (0 and 1 take exact variants),
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
  ir::Shape dims;
  bool operator==(const ArgGuard& o) const {
    return dtype == o.dtype && contiguous == o.contiguous && dims == o.dims;
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

// `g` with the symbols for which keep[sym] is false made exact at `args`' extents, and the others
// renumbered in argument and dim order (their facts kept).
VariantGuard keep_symbols(const VariantGuard& g, std::span<const Array> args,
                          const std::vector<bool>& keep);

}  // namespace kiln
