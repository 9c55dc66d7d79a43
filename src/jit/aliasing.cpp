#include "jit/aliasing.h"

#include <kiln/dtype.h>

#include <cstdint>

namespace kiln {

namespace {

// Bytes per element by DType, without a call per array (the check runs on every call()).
constexpr uint8_t kDTypeBytes[] = {
#define KILN_DTYPE_BYTES(name, str, size) size,
    KILN_FOR_EACH_DTYPE(KILN_DTYPE_BYTES)
#undef KILN_DTYPE_BYTES
};

struct ByteSpan {
  uintptr_t lo = 0, hi = 0;  // [lo, hi); empty where lo == hi
};

// From the array's lowest element to one past its highest, whatever the signs of its strides.
// Contiguous arrays (most calls' arrays) take their element count alone.
ByteSpan span_of(const Array& a) {
  const int64_t* shape = a.shape().data();
  const size_t nd = a.shape().size();
  const auto base = reinterpret_cast<uintptr_t>(a.data());
  const int64_t size = kDTypeBytes[static_cast<size_t>(a.dtype())];
  if (a.is_contiguous()) {
    int64_t n = 1;
    for (size_t d = 0; d < nd; ++d) n *= shape[d];
    return {base, base + uintptr_t(n * size)};
  }
  const int64_t* strides = a.strides().data();
  int64_t lo = 0, hi = 0;  // element offsets from data()
  for (size_t d = 0; d < nd; ++d) {
    if (shape[d] == 0) return {};
    const int64_t reach = strides[d] * (shape[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  return {base + uintptr_t(lo * size), base + uintptr_t((hi + 1) * size)};
}

}  // namespace

bool outputs_overlap_inputs(std::span<const Array> inputs, std::span<const Array> outputs,
                            const int64_t* input_bytes) {
  for (const Array& out : outputs) {
    const ByteSpan o = span_of(out);
    if (o.lo == o.hi) continue;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Array& in = inputs[k];
      ByteSpan i;
      if (input_bytes && input_bytes[k] >= 0) {
        i.lo = reinterpret_cast<uintptr_t>(in.data());
        i.hi = i.lo + uintptr_t(input_bytes[k]);
      } else {
        i = span_of(in);
      }
      if (i.lo < o.hi && o.lo < i.hi) return true;
    }
  }
  return false;
}

}  // namespace kiln
