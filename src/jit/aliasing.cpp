#include "jit/aliasing.h"

#include <kiln/dtype.h>

#include <cstdint>

namespace kiln {

namespace {

struct ByteSpan {
  uintptr_t lo = 0, hi = 0;  // [lo, hi); empty where lo == hi
};

// From the array's lowest element to one past its highest, whatever the signs of its strides.
ByteSpan span_of(const Array& a) {
  const std::vector<int64_t>& shape = a.shape();
  const std::vector<int64_t>& strides = a.strides();
  int64_t lo = 0, hi = 0;  // element offsets from data()
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return {};
    const int64_t reach = strides[d] * (shape[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  const auto base = reinterpret_cast<uintptr_t>(a.data());
  const auto size = static_cast<int64_t>(dtype_size(a.dtype()));
  return {base + uintptr_t(lo * size), base + uintptr_t((hi + 1) * size)};
}

}  // namespace

bool outputs_overlap_inputs(std::span<const Array> inputs, std::span<const Array> outputs) {
  for (const Array& out : outputs) {
    const ByteSpan o = span_of(out);
    if (o.lo == o.hi) continue;
    for (const Array& in : inputs) {
      const ByteSpan i = span_of(in);
      if (i.lo < o.hi && o.lo < i.hi) return true;
    }
  }
  return false;
}

}  // namespace kiln
