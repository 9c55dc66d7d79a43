// kiln::Array: a strided n-d buffer, either borrowed (Array::view) or owned by kiln (Array::empty,
// 64-byte aligned). This is what compiled functions take and return.
#pragma once

#include <kiln/dtype.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Array {
 public:
  Array() = default;
  // Borrows `data`; strides are in elements, empty means contiguous row-major.
  static Array view(void* data, std::vector<int64_t> shape, DType dtype,
                    std::vector<int64_t> strides = {});
  // Allocates a contiguous, 64-byte aligned array (contents uninitialized).
  static Array empty(std::vector<int64_t> shape, DType dtype);

  void* data() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  std::string device() const { return "cpu"; }
  // Row-major without gaps (computed once, when the array is made).
  bool is_contiguous() const { return contiguous_; }
  // Keeps the owning allocation alive (null for borrowed views).
  const std::shared_ptr<void>& owner() const { return owner_; }

 private:
  void* data_ = nullptr;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  DType dtype_ = DType::f32;
  bool contiguous_ = true;
  std::shared_ptr<void> owner_;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

}  // namespace kiln
