// Element types of kiln tensors and arrays.
// One list (KILN_FOR_EACH_DTYPE) generates the enum, the names and the sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln {

#define KILN_FOR_EACH_DTYPE(X) \
  X(f32, "float32", 4)         \
  X(f64, "float64", 8)         \
  X(f16, "float16", 2)         \
  X(bf16, "bfloat16", 2)       \
  X(i8, "int8", 1)             \
  X(i32, "int32", 4)           \
  X(i64, "int64", 8)           \
  X(boolean, "bool", 1)

enum class DType : uint8_t {
#define KILN_DTYPE_ENUM(name, str, size) name,
  KILN_FOR_EACH_DTYPE(KILN_DTYPE_ENUM)
#undef KILN_DTYPE_ENUM
};

inline constexpr int kNumDTypes = 8;

#define KILN_DTYPE_CONST(name, str, size) inline constexpr DType name = DType::name;
KILN_FOR_EACH_DTYPE(KILN_DTYPE_CONST)
#undef KILN_DTYPE_CONST

std::string_view dtype_name(DType t);
size_t dtype_size(DType t);
bool is_floating(DType t);  // f32 f64 f16 bf16
bool is_integer(DType t);   // i8 i32 i64
// Parses "float32", "f32", "int64", "bool", ...; throws kiln::DTypeError on an unknown name.
DType dtype_from_name(std::string_view name);

}  // namespace kiln
