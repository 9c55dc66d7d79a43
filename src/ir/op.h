// Op kinds of kiln's IR, generated from ops.def, and their properties.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::ir {

enum class OpKind : uint8_t {
  leaf,
  unary,
  binary,
  ternary,
  cast,
  view,
  reduce,
  contraction,
  concat
};

enum class Op : uint8_t {
#define KILN_OP(name, kind, str) name,
#include "ir/ops.def"
};

inline constexpr int kNumOps = 0
#define KILN_OP(name, kind, str) +1
#include "ir/ops.def"
    ;

std::string_view op_name(Op op);
OpKind op_kind(Op op);

inline bool is_elementwise(Op op) {
  OpKind k = op_kind(op);
  return k == OpKind::unary || k == OpKind::binary || k == OpKind::ternary || k == OpKind::cast;
}
inline bool is_view(Op op) { return op_kind(op) == OpKind::view; }
inline bool is_reduce(Op op) { return op_kind(op) == OpKind::reduce; }
inline bool is_comparison(Op op) {
  return op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge || op == Op::Eq ||
         op == Op::Ne;
}

// Tags kept on the root node of a composite op built from primitives, so a backend can match it.
enum class Composite : uint8_t {
  none,
  softmax,
  log_softmax,
  layer_norm,
  rms_norm,
  gelu,
  gelu_tanh,
  silu
};
std::string_view composite_name(Composite c);

}  // namespace kiln::ir
