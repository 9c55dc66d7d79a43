#include "jit/signature.h"

#include <kiln/errors.h>

namespace kiln {

namespace {

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

uint64_t exact_signature_hash(std::span<const Array> args) {
  uint64_t h = args.size();
  for (const Array& a : args) {
    h = mix(h, static_cast<uint64_t>(a.dtype()) | (uint64_t{a.is_contiguous()} << 8) |
                   (a.shape().size() << 16));
    for (int64_t d : a.shape()) h = mix(h, static_cast<uint64_t>(d));
  }
  return h;
}

bool matches(const Signature& sig, std::span<const Array> args) {
  if (sig.args.size() != args.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSig& g = sig.args[i];
    const Array& a = args[i];
    if (g.dtype != a.dtype() || g.shape != a.shape() || g.contiguous != a.is_contiguous())
      return false;
  }
  return true;
}

Signature exact_signature(std::span<const Array> args) {
  Signature s;
  s.args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Array& a = args[i];
    ArgSig& g = s.args[i];
    g.dtype = a.dtype();
    g.shape = a.shape();
    g.contiguous = a.is_contiguous();
  }
  s.hash = exact_signature_hash(args);
  return s;
}

std::string Signature::str() const {
  std::string s;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += " ";
    s += std::string(dtype_name(args[i].dtype)) + "[";
    for (size_t d = 0; d < args[i].shape.size(); ++d)
      s += (d ? "," : "") + std::to_string(args[i].shape[d]);
    s += "]";
    if (!args[i].contiguous) s += ":strided";
  }
  return s;
}

}  // namespace kiln
