// The simplify pass: arithmetic identities with scalar constants, the rules that must not fire,
// permute/reshape/expand/cast/slice chains, cast of cast only through a lossless dtype, and tags
// and locations kept on rebuilt nodes; each rewrite checked against the interpreter.
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/passes/passes.h"
#include "ir_passes_testing.h"

#include <kiln/errors.h>

#include <catch2/catch.hpp>

#include <string>

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::ir::passes_test;

TEST_CASE("simplify: arithmetic identities with scalar constants", "[ir][passes][simplify]") {
  NodePtr x = make_input(0, DType::f32, S({4, 8}));
  auto simplified_output = [&](NodePtr out) {
    Graph g = simplify(graph_of({x}, {out}));
    verify(g);
    return g.outputs[0];
  };
  auto c = [](double v) { return make_scalar(v, DType::f32); };
  CHECK(simplified_output(make_binary(Op::Mul, x, c(1))) == x);
  CHECK(simplified_output(make_binary(Op::Mul, c(1), x)) == x);
  CHECK(simplified_output(make_binary(Op::Add, x, c(0))) == x);
  CHECK(simplified_output(make_binary(Op::Add, c(0), x)) == x);
  CHECK(simplified_output(make_binary(Op::Sub, x, c(0))) == x);
  CHECK(simplified_output(make_binary(Op::Div, x, c(1))) == x);
  CHECK(simplified_output(make_unary(Op::Neg, make_unary(Op::Neg, x))) == x);
  // A full-shape scalar broadcast (make_full_like) counts too.
  CHECK(simplified_output(make_binary(Op::Mul, x, make_full_like(1.0, x))) == x);
  // Integers: x*1 and x+0.
  NodePtr i = make_input(0, DType::i32, S({5}));
  Graph gi = simplify(graph_of({i}, {make_binary(Op::Mul, i, make_scalar(1, DType::i32)),
                                     make_binary(Op::Add, make_scalar(0, DType::i32), i)}));
  CHECK(gi.outputs[0] == i);
  CHECK(gi.outputs[1] == i);
  // Chained identities collapse in one pass (inputs are simplified before their users).
  CHECK(simplified_output(make_binary(Op::Add, make_binary(Op::Mul, x, c(1)), c(0))) == x);
}

TEST_CASE("simplify: rules that must not fire", "[ir][passes][simplify]") {
  NodePtr x = make_input(0, DType::f32, S({4}));
  auto unchanged = [&](NodePtr out) {
    Graph g = simplify(graph_of({x}, {out}));
    return g.outputs[0] == out;
  };
  auto c = [](double v) { return make_scalar(v, DType::f32); };
  CHECK(unchanged(make_binary(Op::Mul, x, c(0))));  // NaN * 0 is NaN, inf * 0 is NaN
  CHECK(unchanged(make_binary(Op::Mul, c(0), x)));
  CHECK(unchanged(make_binary(Op::Sub, c(0), x)));  // 0 - x is -x
  CHECK(unchanged(make_binary(Op::Div, c(1), x)));  // 1 / x
  CHECK(unchanged(make_binary(Op::Mul, x, c(2))));
  CHECK(unchanged(make_binary(Op::Add, x, c(1e-30))));
  CHECK(unchanged(make_unary(Op::Neg, x)));
  // A non-scalar constant of ones is not a scalar identity.
  CHECK(unchanged(make_binary(Op::Mul, x, f32_constant({1, 1, 1, 1}, S({4})))));
  // A tagged node is kept whole (a backend matches the composite).
  CHECK(unchanged(tag_composite(make_binary(Op::Mul, x, c(1)), Composite::silu)));
}

TEST_CASE("simplify: permutes compose and identities vanish", "[ir][passes][simplify]") {
  NodePtr x = make_input(0, DType::f32, S({2, 3, 4}));
  // Inverse permutations cancel.
  Graph g1 = simplify(graph_of({x}, {make_permute(make_permute(x, {1, 2, 0}), {2, 0, 1})}));
  CHECK(g1.outputs[0] == x);
  // Two permutes become one with the composed permutation.
  NodePtr pp = make_permute(make_permute(x, {1, 2, 0}), {1, 0, 2});
  Graph g2 = simplify(graph_of({x}, {pp}));
  REQUIRE(g2.outputs[0]->op == Op::Permute);
  CHECK(g2.outputs[0]->inputs[0] == x);
  CHECK(g2.outputs[0]->shape == pp->shape);
  CHECK(g2.outputs[0]->attrs.perm == std::vector<int64_t>{2, 1, 0});
  check_same_semantics(graph_of({x}, {pp}), g2);
  // An identity permute built directly is removed.
  Attrs a;
  a.perm = {0, 1, 2};
  NodePtr id = make_node(Op::Permute, DType::f32, x->shape, {x}, a);
  CHECK(simplify(graph_of({x}, {id})).outputs[0] == x);
}

TEST_CASE("simplify: reshape, expand, cast and slice chains", "[ir][passes][simplify]") {
  NodePtr x = make_input(0, DType::f32, S({2, 6}));
  // reshape(reshape(x)) -> reshape(x); back to the original shape -> x.
  NodePtr rr = make_reshape(make_reshape(x, S({3, 4})), S({12}));
  Graph g1 = simplify(graph_of({x}, {rr}));
  REQUIRE(g1.outputs[0]->op == Op::Reshape);
  CHECK(g1.outputs[0]->inputs[0] == x);
  CHECK(simplify(graph_of({x}, {make_reshape(make_reshape(x, S({12})), S({2, 6}))})).outputs[0] ==
        x);
  // expand(expand(x)) -> expand(x).
  NodePtr r = make_input(0, DType::f32, S({1, 6}));
  NodePtr ee = make_expand(make_expand(r, S({4, 6})), S({3, 4, 6}));
  Graph g2 = simplify(graph_of({r}, {ee}));
  REQUIRE(g2.outputs[0]->op == Op::Expand);
  CHECK(g2.outputs[0]->inputs[0] == r);
  check_same_semantics(graph_of({r}, {ee}), g2);
  // Views and casts to the identical shape or dtype (only buildable with make_node) are removed.
  Attrs sl;
  sl.starts = {0, 0};
  sl.steps = {1, 1};
  for (NodePtr same : {make_node(Op::Reshape, DType::f32, x->shape, {x}),
                       make_node(Op::Expand, DType::f32, x->shape, {x}),
                       make_node(Op::Cast, DType::f32, x->shape, {x}),
                       make_node(Op::Slice, DType::f32, x->shape, {x}, sl)})
    CHECK(simplify(graph_of({x}, {same})).outputs[0] == x);
}

TEST_CASE("simplify: cast of cast only when the middle dtype is lossless",
          "[ir][passes][simplify]") {
  auto cc = [](DType from, DType mid, DType to) {
    NodePtr x = make_input(0, from, S({3}));
    NodePtr out = make_cast(make_cast(x, mid), to);
    Graph g = simplify(graph_of({x}, {out}));
    verify(g);
    return std::make_pair(x, g.outputs[0]);
  };
  {
    auto [x, out] = cc(DType::f32, DType::f64, DType::f32);
    CHECK(out == x);
  }
  {
    auto [x, out] = cc(DType::i8, DType::f16, DType::i8);
    CHECK(out == x);
  }
  {
    auto [x, out] = cc(DType::boolean, DType::i32, DType::boolean);
    CHECK(out == x);
  }
  {
    auto [x, out] = cc(DType::f16, DType::f32, DType::i32);  // lossless middle: one cast remains
    REQUIRE(out->op == Op::Cast);
    CHECK(out->inputs[0] == x);
    CHECK(out->dtype == DType::i32);
  }
  // Lossy middles keep both casts.
  for (auto [from, mid] : {std::pair{DType::f64, DType::f32}, std::pair{DType::i32, DType::f32},
                           std::pair{DType::f32, DType::f16}, std::pair{DType::f16, DType::bf16},
                           std::pair{DType::i32, DType::i8}, std::pair{DType::f32, DType::i32}}) {
    auto [x, out] = cc(from, mid, from);
    INFO(dtype_name(from) << " -> " << dtype_name(mid));
    REQUIRE(out->op == Op::Cast);
    CHECK(out->inputs[0]->op == Op::Cast);
  }
}

TEST_CASE("simplify: keeps tags and locations of rebuilt nodes", "[ir][passes][simplify]") {
  NodePtr x = make_input(0, DType::f32, S({4}));
  NodePtr tagged;
  {
    LocScope loc("model.py:12");
    tagged = tag_composite(make_unary(Op::Exp, make_binary(Op::Mul, x, make_scalar(1, DType::f32))),
                           Composite::gelu);
  }
  Graph g = simplify(graph_of({x}, {tagged}));
  REQUIRE(g.outputs[0]->op == Op::Exp);
  CHECK(g.outputs[0]->inputs[0] == x);
  CHECK(g.outputs[0]->tag == Composite::gelu);
  CHECK(g.outputs[0]->loc == "model.py:12");
}
