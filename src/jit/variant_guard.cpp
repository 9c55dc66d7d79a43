#include "jit/variant_guard.h"

namespace kiln {

bool VariantGuard::bind(std::span<const Array> in, int64_t* dims) const {
  if (in.size() != args.size()) return false;
  const int n = num_symbols();
  for (int s = 0; s < n; ++s) dims[s] = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    const ArgGuard& g = args[i];
    const Array& a = in[i];
    const auto& shape = a.shape();
    if (g.dtype != a.dtype() || shape.size() != g.dims.size()) return false;
    for (size_t d = 0; d < shape.size(); ++d) {
      const ir::Dim& want = g.dims[d];
      const int64_t v = shape[d];
      if (!want.is_symbolic()) {
        if (v != want.value) return false;
        continue;
      }
      int64_t& bound = dims[want.sym];
      if (bound < 0) {
        if (v < 2) return false;
        if (facts[want.sym].multiple && v % ir::kSymbolMultiple != 0) return false;
        bound = v;
      } else if (bound != v) {
        return false;
      }
    }
    if (g.contiguous != a.is_contiguous() || g.aligned != is_aligned64(a)) return false;
  }
  return true;
}

int64_t VariantGuard::specificity() const {
  int64_t exact = 0;
  for (const ArgGuard& g : args)
    for (const ir::Dim& d : g.dims) exact += !d.is_symbolic();
  int64_t multiples = 0;
  for (const ir::SymbolFact& f : facts) multiples += f.multiple;
  return exact * 1024 + multiples;
}

std::string VariantGuard::str() const {
  std::string s;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += " ";
    s += std::string(dtype_name(args[i].dtype)) + ir::shape_str(args[i].dims);
    if (!args[i].contiguous) s += ":strided";
    if (!args[i].aligned) s += ":unaligned";
  }
  for (size_t sym = 0; sym < facts.size(); ++sym)
    s += (sym ? ", s" : "; s") + std::to_string(sym) + (facts[sym].multiple ? ">=2%16" : ">=2");
  return s;
}

}  // namespace kiln
