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
    if (g.contiguous != a.is_contiguous()) return false;
  }
  return true;
}

VariantGuard keep_symbols(const VariantGuard& g, std::span<const Array> args,
                          const std::vector<bool>& keep) {
  VariantGuard out;
  out.args = g.args;
  std::vector<int32_t> renumber(g.facts.size(), -1);
  for (size_t i = 0; i < out.args.size(); ++i)
    for (size_t d = 0; d < out.args[i].dims.size(); ++d) {
      ir::Dim& dim = out.args[i].dims[d];
      if (!dim.is_symbolic()) continue;
      if (!keep[dim.sym]) {
        dim = ir::Dim::concrete(args[i].shape()[d]);
        continue;
      }
      if (renumber[dim.sym] < 0) {
        renumber[dim.sym] = static_cast<int32_t>(out.facts.size());
        out.facts.push_back(g.facts[dim.sym]);
      }
      dim = ir::Dim::symbol(renumber[dim.sym]);
    }
  return out;
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
  }
  for (size_t sym = 0; sym < facts.size(); ++sym)
    s += (sym ? ", s" : "; s") + std::to_string(sym) + (facts[sym].multiple ? ">=2%16" : ">=2");
  return s;
}

}  // namespace kiln
