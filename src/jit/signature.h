// The signature of a call: per argument dtype, shape and stride class (contiguous or not). The
// data pointers' alignment is not part of it: no backend specializes on it, and a variant per
// alignment would only recompile the same kernels for numpy arrays that happen to sit elsewhere.
// Executables are memoized by signature. A SpecializationPolicy turns the arguments of a call into
// the signature to look up (exact dims now; symbolic dims slot in here).
#pragma once

#include <kiln/array.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln {

struct ArgSig {
  DType dtype = DType::f32;
  bool contiguous = true;
  std::vector<int64_t> shape;
  bool operator==(const ArgSig& o) const {
    return dtype == o.dtype && contiguous == o.contiguous && shape == o.shape;
  }
};

struct Signature {
  std::vector<ArgSig> args;
  uint64_t hash = 0;
  bool operator==(const Signature& o) const { return hash == o.hash && args == o.args; }
  std::string str() const;  // "f32[4,8] f32[8]:strided ..."
};

struct SignatureHash {
  size_t operator()(const Signature& s) const { return s.hash; }
};

// Exact specialization: every dim as given.
Signature exact_signature(std::span<const Array> args);
// The hash exact_signature(args) would have, and whether `sig` is that signature, computed from
// the arrays without allocating (the dispatch path of a cache hit).
uint64_t exact_signature_hash(std::span<const Array> args);
bool matches(const Signature& sig, std::span<const Array> args);

}  // namespace kiln
