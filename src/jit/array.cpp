#include <kiln/array.h>
#include <kiln/errors.h>

#include <cstdlib>
#include <new>
#include <string>

namespace kiln {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return st;
}

namespace {

bool contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  // An array with no elements is contiguous whatever its strides (numpy's rule).
  for (int64_t d : shape)
    if (d == 0) return true;
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != acc) return false;
    acc *= shape[i];
  }
  return true;
}

void check_shape(const std::vector<int64_t>& shape, const char* what) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      throw ShapeError(std::string(what) + ": dim " + std::to_string(i) + " must be >= 0, got " +
                       std::to_string(shape[i]));
}
}  // namespace

Array Array::view(void* data, std::vector<int64_t> shape, DType dtype,
                  std::vector<int64_t> strides) {
  check_shape(shape, "Array::view shape");
  if (strides.empty()) strides = contiguous_strides(shape);
  if (strides.size() != shape.size())
    throw ShapeError("Array::view: expected " + std::to_string(shape.size()) +
                     " strides (one per dim), got " + std::to_string(strides.size()));
  Array a;
  a.data_ = data;
  a.shape_ = std::move(shape);
  a.strides_ = std::move(strides);
  a.dtype_ = dtype;
  a.contiguous_ = contiguous(a.shape_, a.strides_);
  if (a.data_ == nullptr && a.numel() > 0)
    throw Error("Array::view: null data pointer for a non-empty array");
  return a;
}

Array Array::empty(std::vector<int64_t> shape, DType dtype) {
  check_shape(shape, "Array::empty shape");
  Array a;
  a.shape_ = std::move(shape);
  a.strides_ = contiguous_strides(a.shape_);
  a.dtype_ = dtype;
  size_t bytes = static_cast<size_t>(a.numel()) * dtype_size(dtype);
  bytes = (bytes + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  a.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  a.data_ = p;
  return a;
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

}  // namespace kiln
