// What the files behind the public kiln::Tensor API share: a Tensor's node (with the error for an
// undefined one), a node wrapped as a Tensor, and a binary op of two Tensors.
#pragma once

#include "ir/builder.h"

#include <kiln/errors.h>
#include <kiln/tensor.h>

#include <string>

namespace kiln::ir {

inline const NodePtr& node_of(const Tensor& t, const char* op, const char* what = "operand") {
  if (!t.defined())
    throw Error(std::string(op) + ": " + what + " is an undefined Tensor (default-constructed)");
  return t.node();
}

inline Tensor wrap(NodePtr n) { return Tensor(std::move(n)); }

inline Tensor binary(Op op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op).data();
  return wrap(make_binary(op, node_of(a, name, "left operand"), node_of(b, name, "right operand")));
}

}  // namespace kiln::ir
