// Shared by the reference interpreter's tests (ir_interpreter_test.cpp,
// ir_interpreter_int_test.cpp, ir_elements_test.cpp).
#pragma once

#include "ir/interpreter.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace interp_test {

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();

// A host tensor of dtype t and shape `shape` holding v.
inline kiln::ir::HostTensor ht(kiln::DType t, std::vector<int64_t> shape, std::vector<double> v) {
  kiln::ir::HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.values = std::move(v);
  return h;
}

// Runs a graph with one output on the given input values.
inline kiln::ir::HostTensor run(const kiln::ir::NodePtr& out, std::vector<kiln::ir::NodePtr> inputs,
                                std::vector<kiln::ir::HostTensor> values) {
  kiln::ir::Graph g;
  g.inputs = std::move(inputs);
  g.outputs = {out};
  auto r = kiln::ir::interpret(g, values);
  REQUIRE(r.size() == 1);
  return r[0];
}

// Equal element by element, NaN matching NaN.
inline bool same(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) return false;
    if (!std::isnan(want[i]) && got[i] != want[i]) return false;
  }
  return true;
}

}  // namespace interp_test
