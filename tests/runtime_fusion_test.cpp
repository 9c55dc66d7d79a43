#include "ir/builder.h"
#include "ir/passes/fusion.h"

#include <catch2/catch.hpp>

using namespace kiln::ir;

namespace {
Shape s(std::vector<int64_t> d) { return concrete_shape(d); }
}  // namespace

TEST_CASE("an elementwise chain is one kernel", "[fusion]") {
  auto x = make_input(0, kiln::DType::f32, s({4, 8}));
  auto y = make_unary(
      Op::Exp, make_binary(Op::Add, make_binary(Op::Mul, x, x), make_scalar(1, kiln::DType::f32)));
  Graph g{{x}, {y}};
  FusionPlan p = fuse(g);
  REQUIRE(p.groups.size() == 1);
  REQUIRE(p.groups[0].kind == GroupKind::elementwise);
  REQUIRE(p.groups[0].leaves.size() == 1);
}

TEST_CASE("reductions over the same rows share one row kernel with their consumers", "[fusion]") {
  auto x = make_input(0, kiln::DType::f32, s({16, 32}));
  auto m = make_reduce(Op::ReduceMax, x, {1}, true);
  auto e = make_unary(Op::Exp, make_binary(Op::Sub, x, m));
  auto sum = make_reduce(Op::ReduceSum, e, {1}, true);
  auto y = make_binary(Op::Div, e, sum);
  FusionPlan p = fuse(Graph{{x}, {y}});
  REQUIRE(p.groups.size() == 1);
  REQUIRE(p.groups[0].kind == GroupKind::row_reduce);
  REQUIRE_FALSE(p.groups[0].root_is_outer);
  REQUIRE(p.groups[0].reduce_axes == std::vector<int64_t>{1});
}

TEST_CASE("a value used by two kernels is stored once", "[fusion]") {
  auto a = make_input(0, kiln::DType::f32, s({8, 8}));
  auto b = make_input(1, kiln::DType::f32, s({8, 8}));
  auto t = make_unary(Op::Tanh, a);
  auto mm = make_matmul(t, b);
  auto y = make_binary(Op::Add, mm, t);
  FusionPlan p = fuse(Graph{{a, b}, {y}});
  // tanh (used by the matmul and the add), then the matmul with the add as its epilogue.
  REQUIRE(p.groups.size() == 2);
  REQUIRE(p.groups[0].root == t);
  REQUIRE(p.groups[1].kind == GroupKind::matmul);
  REQUIRE(p.groups[1].root == y);
  REQUIRE(p.groups[1].contraction == mm);
}

TEST_CASE("a matmul feeding a softmax is not absorbed into the row kernel", "[fusion]") {
  auto a = make_input(0, kiln::DType::f32, s({8, 4}));
  auto b = make_input(1, kiln::DType::f32, s({4, 5}));
  auto mm = make_matmul(a, b);
  auto m = make_reduce(Op::ReduceMax, mm, {1}, true);
  auto y = make_binary(Op::Sub, mm, m);
  FusionPlan p = fuse(Graph{{a, b}, {y}});
  REQUIRE(p.groups.size() == 2);
  REQUIRE(p.groups[0].kind == GroupKind::matmul);
  REQUIRE(p.groups[1].kind == GroupKind::row_reduce);
}

TEST_CASE("matmul reads transposed operands through views", "[fusion]") {
  auto a = make_input(0, kiln::DType::f32, s({8, 4}));
  auto b = make_input(1, kiln::DType::f32, s({8, 5}));
  auto y = make_matmul(make_permute(a, {1, 0}), b);
  FusionPlan p = fuse(Graph{{a, b}, {y}});
  REQUIRE(p.groups.size() == 1);
  REQUIRE(p.groups[0].leaves.size() == 2);
}

TEST_CASE("forced materialization splits a row kernel", "[fusion]") {
  auto x = make_input(0, kiln::DType::f32, s({16, 32}));
  auto m = make_reduce(Op::ReduceMax, x, {1}, true);
  auto y = make_binary(Op::Sub, x, m);
  FusionPlan one = fuse(Graph{{x}, {y}});
  REQUIRE(one.groups.size() == 1);
  FusionPlan two = fuse(Graph{{x}, {y}}, {m.get()});
  REQUIRE(two.groups.size() == 2);
  REQUIRE(two.groups[0].root == m);
}

TEST_CASE("outputs that are inputs get a copy kernel, scalar constants are inlined", "[fusion]") {
  auto x = make_input(0, kiln::DType::f32, s({3}));
  auto c = make_scalar(2, kiln::DType::f32);
  auto y = make_binary(Op::Mul, x, c);
  FusionPlan p = fuse(Graph{{x}, {x, y}});
  REQUIRE(p.groups.size() == 2);
  for (const auto& g : p.groups)
    for (const auto& l : g.leaves) REQUIRE(l->op == Op::Input);
}

namespace {
// Whether group g computes node n itself.
bool computes(const FusionGroup& g, const NodePtr& n) {
  return std::find(g.nodes.begin(), g.nodes.end(), n) != g.nodes.end();
}
}  // namespace

TEST_CASE("a view read by two kernels is read through by each, not stored", "[fusion]") {
  // x @ w.T and z @ w.T: both matmuls read w through the transpose; no kernel copies it.
  auto x = make_input(0, kiln::DType::f32, s({8, 4}));
  auto z = make_input(1, kiln::DType::f32, s({3, 4}));
  auto w = make_input(2, kiln::DType::f32, s({5, 4}));
  auto wt = make_permute(w, {1, 0});
  auto y1 = make_matmul(x, wt), y2 = make_matmul(z, wt);
  FusionPlan p = fuse(Graph{{x, z, w}, {y1, y2}});
  REQUIRE(p.groups.size() == 2);
  for (const auto& g : p.groups) {
    CHECK(g.kind == GroupKind::matmul);
    CHECK(computes(g, wt));
    CHECK(g.nodes.front() == wt);  // before its reader: the group stays in topological order
    CHECK(g.leaves.size() == 2);
  }
}

TEST_CASE("a shared bias broadcast stays in each epilogue, a computed base is stored once",
          "[fusion]") {
  auto x = make_input(0, kiln::DType::f32, s({6, 8}));
  auto w = make_input(1, kiln::DType::f32, s({8, 8}));
  auto b = make_input(2, kiln::DType::f32, s({8}));
  auto bb = make_expand(b, s({6, 8}));
  auto h = make_unary(Op::Relu, make_binary(Op::Add, make_matmul(x, w), bb));
  auto y = make_unary(Op::Relu, make_binary(Op::Add, make_matmul(h, w), bb));
  FusionPlan p = fuse(Graph{{x, w, b}, {y}});
  REQUIRE(p.groups.size() == 2);
  for (const auto& g : p.groups) {
    CHECK(g.kind == GroupKind::matmul);
    CHECK(computes(g, bb));
  }
  // The expand of a computed value (tanh(b), read by two kernels through the expand): tanh is
  // stored once ([8]), not its broadcast ([6, 8]).
  auto t = make_unary(Op::Tanh, b);
  auto tb = make_expand(t, s({6, 8}));
  auto u1 = make_binary(Op::Add, make_matmul(x, w), tb);
  auto u2 = make_binary(Op::Mul, x, tb);
  FusionPlan q = fuse(Graph{{x, w, b}, {u1, u2}});
  REQUIRE(q.groups.size() == 3);
  CHECK(q.groups[0].root == t);  // runs first
  for (size_t i = 1; i < 3; ++i) {
    CHECK(computes(q.groups[i], tb));
    CHECK(std::find(q.groups[i].leaves.begin(), q.groups[i].leaves.end(), t) !=
          q.groups[i].leaves.end());
  }
}

TEST_CASE("a view that is an output, or forced, is still stored", "[fusion]") {
  auto w = make_input(0, kiln::DType::f32, s({5, 4}));
  auto x = make_input(1, kiln::DType::f32, s({8, 4}));
  auto wt = make_permute(w, {1, 0});
  auto y = make_matmul(x, wt);
  FusionPlan p = fuse(Graph{{w, x}, {wt, y}});
  REQUIRE(p.groups.size() == 2);
  auto z = make_matmul(make_unary(Op::Neg, x), wt);
  FusionPlan q = fuse(Graph{{w, x}, {y, z}}, {wt.get()});
  REQUIRE(q.groups.size() == 4);  // wt forced; neg; two matmuls
  CHECK(std::count_if(q.groups.begin(), q.groups.end(),
                      [&](const FusionGroup& g) { return g.root == wt; }) == 1);
}

TEST_CASE("an output that drops a computed value's size-1 dims is stored by that value's kernel",
          "[fusion]") {
  // x [K] @ w [K, N] as traced: reshape x to [1, K], matmul, reshape [1, N] -> [N].
  auto x = make_input(0, kiln::DType::f32, s({8}));
  auto w = make_input(1, kiln::DType::f32, s({8, 5}));
  auto mm = make_matmul(make_reshape(x, s({1, 8})), w);
  auto y = make_reshape(mm, s({5}));
  FusionPlan p = fuse(Graph{{x, w}, {y}});
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].root == mm);
  REQUIRE(p.output_views.count(y.get()) == 1);
  CHECK(p.output_views.at(y.get()) == mm.get());
  // Not when the value is an output too, when two outputs view it, or when the base is a view.
  FusionPlan both = fuse(Graph{{x, w}, {y, mm}});
  CHECK(both.output_views.empty());
  CHECK(both.groups.size() == 2);
  auto y2 = make_reshape(mm, s({1, 5, 1}));
  FusionPlan two = fuse(Graph{{x, w}, {y, y2}});
  CHECK(two.output_views.empty());
  FusionPlan of_input = fuse(Graph{{x, w}, {make_reshape(w, s({1, 8, 5}))}});
  CHECK(of_input.output_views.empty());
  CHECK(of_input.groups.size() == 1);  // a copy kernel
}

TEST_CASE("a chain longer than a group's cap is cut into groups of at most 256 nodes", "[fusion]") {
  // One group of 20000 fused ops overflowed the stack in code generation, and LLVM's time on one
  // kernel grows faster than its size.
  auto x = make_input(0, kiln::DType::f32, s({4, 8}));
  NodePtr y = x;
  for (int i = 0; i < 600; ++i)
    y = make_binary(i % 2 ? Op::Mul : Op::Add, y, make_scalar(1.5, kiln::DType::f32));
  FusionPlan p = fuse(Graph{{x}, {y}});
  REQUIRE(p.groups.size() == 3);  // 256 + 256 + 88 ops
  size_t ops = 0;
  for (const FusionGroup& g : p.groups) {
    size_t computed = 0;
    for (const NodePtr& n : g.nodes) computed += n->op == Op::Add || n->op == Op::Mul;
    CHECK(computed <= 256);
    ops += computed;
  }
  CHECK(ops == 600);
  // Each group reads the one before it: the input, then a stored root.
  for (const FusionGroup& g : p.groups) CHECK(g.leaves.size() == 1);
}
