#include <kiln/dtype.h>
#include <kiln/errors.h>

#include <string>

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
#define KILN_DTYPE_NAME(name, str, size) \
  case DType::name:                      \
    return str;
    KILN_FOR_EACH_DTYPE(KILN_DTYPE_NAME)
#undef KILN_DTYPE_NAME
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
#define KILN_DTYPE_SIZE(name, str, size) \
  case DType::name:                      \
    return size;
    KILN_FOR_EACH_DTYPE(KILN_DTYPE_SIZE)
#undef KILN_DTYPE_SIZE
  }
  return 0;
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

bool is_integer(DType t) { return t == DType::i8 || t == DType::i32 || t == DType::i64; }

DType dtype_from_name(std::string_view name) {
#define KILN_DTYPE_PARSE(n, str, size) \
  if (name == #n || name == str) return DType::n;
  KILN_FOR_EACH_DTYPE(KILN_DTYPE_PARSE)
#undef KILN_DTYPE_PARSE
  if (name == "bool_") return DType::boolean;
  throw DTypeError(
      "unknown dtype '" + std::string(name) +
      "': expected one of float32, float64, float16, bfloat16, int8, int32, int64, bool");
}

}  // namespace kiln
