#include "ir/op.h"

namespace kiln::ir {

std::string_view op_name(Op op) {
  switch (op) {
#define KILN_OP(name, kind, str) \
  case Op::name:                 \
    return str;
#include "ir/ops.def"
  }
  return "?";
}

OpKind op_kind(Op op) {
  switch (op) {
#define KILN_OP(name, kind, str) \
  case Op::name:                 \
    return OpKind::kind;
#include "ir/ops.def"
  }
  return OpKind::leaf;
}

std::string_view composite_name(Composite c) {
  switch (c) {
    case Composite::none:
      return "";
    case Composite::softmax:
      return "softmax";
    case Composite::log_softmax:
      return "log_softmax";
    case Composite::layer_norm:
      return "layer_norm";
    case Composite::rms_norm:
      return "rms_norm";
    case Composite::gelu:
      return "gelu";
    case Composite::gelu_tanh:
      return "gelu_tanh";
    case Composite::silu:
      return "silu";
  }
  return "?";
}

}  // namespace kiln::ir
