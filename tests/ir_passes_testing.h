// Shared by the graph passes' tests (ir_passes_test.cpp, ir_simplify_test.cpp): small graph
// builders, node counts, and the check that a pass keeps the interpreter's results.
#pragma once

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/passes/passes.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

namespace kiln::ir::passes_test {

inline Shape S(std::initializer_list<int64_t> dims) { return concrete_shape(dims); }

inline size_t count_nodes(const Graph& g) { return g.topo_order().size(); }

inline size_t count_op(const Graph& g, Op op) {
  size_t n = 0;
  for (const NodePtr& x : g.topo_order()) n += x->op == op;
  return n;
}

inline NodePtr f32_constant(const std::vector<float>& values, Shape shape) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return make_constant(DType::f32, std::move(shape), std::move(bytes));
}

inline HostTensor random_tensor(const Node& input, std::mt19937& rng) {
  HostTensor t;
  t.dtype = input.dtype;
  t.shape = concrete_dims(input.shape);
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::uniform_int_distribution<int> integer(-50, 50);
  t.values.resize(static_cast<size_t>(t.numel()));
  for (double& v : t.values)
    v = round_to_dtype(is_floating(t.dtype) ? real(rng) : integer(rng), t.dtype);
  return t;
}

// interpret(before) == interpret(after) on a few random inputs (NaN matches NaN), to `tol`
// relative and absolute.
inline void check_same_semantics(const Graph& before, const Graph& after, double tol = 1e-12) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<HostTensor> inputs;
    for (const NodePtr& in : before.inputs) inputs.push_back(random_tensor(*in, rng));
    const auto want = interpret(before, inputs);
    const auto got = interpret(after, inputs);
    REQUIRE(want.size() == got.size());
    for (size_t o = 0; o < want.size(); ++o) {
      REQUIRE(got[o].dtype == want[o].dtype);
      REQUIRE(got[o].shape == want[o].shape);
      CHECK(got[o].ints == want[o].ints);  // integers exactly (empty for floats)
      for (size_t i = 0; i < want[o].values.size(); ++i) {
        const double w = want[o].values[i], g = got[o].values[i];
        if (std::isnan(w)) {
          CHECK(std::isnan(g));
        } else {
          CHECK(g == Approx(w).epsilon(tol).margin(tol));
        }
      }
    }
  }
}

// softmax over the last axis of a 2-d tensor, tagged, as the tracer builds it.
inline NodePtr softmax_of(const NodePtr& x) {
  NodePtr m = make_reduce(Op::ReduceMax, x, {1}, true);
  NodePtr e = make_unary(Op::Exp, make_binary(Op::Sub, x, m));
  return tag_composite(make_binary(Op::Div, e, make_reduce(Op::ReduceSum, e, {1}, true)),
                       Composite::softmax);
}

// The graph of the given inputs and outputs.
inline Graph graph_of(std::vector<NodePtr> inputs, std::vector<NodePtr> outputs) {
  return Graph{std::move(inputs), std::move(outputs)};
}

}  // namespace kiln::ir::passes_test
