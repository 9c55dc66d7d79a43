// The split_reductions pass (src/ir/passes/split_reduction.cpp): which reductions of a whole
// tensor run as two, the shape of the split, and that the interpreter's results stay the same
// (exactly for integers, max and min; to float32 rounding for float sums and means).
#include "ir_passes_testing.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::ir::passes_test;

namespace {

const Op kReductions[] = {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin};

// The reductions of `g` in topological order.
std::vector<NodePtr> reductions(const Graph& g) {
  std::vector<NodePtr> r;
  for (const NodePtr& n : g.topo_order())
    if (is_reduce(n->op)) r.push_back(n);
  return r;
}

}  // namespace

TEST_CASE("split_reductions: a large tensor's reduction to one value runs as two",
          "[ir][passes][split]") {
  for (DType t : {DType::f32, DType::i32}) {
    for (Op op : kReductions) {
      if (op == Op::ReduceMean && t != DType::f32) continue;
      INFO(op_name(op) << " " << dtype_name(t));
      {  // 2-d: the inner reduction keeps the leading axis
        NodePtr x = make_input(0, t, S({512, 1024}));
        NodePtr sum;
        {
          LocScope loc("model.py:7");
          sum = make_reduce(op, x, {0, 1}, false);
        }
        Graph g = graph_of({x}, {sum});
        Graph p = run_pipeline(g);
        INFO(print(p));
        auto r = reductions(p);
        REQUIRE(r.size() == 2);
        CHECK(r[0]->inputs[0]->shape == S({512, 1024}));  // x (an int32 sum's cast of it)
        CHECK(r[0]->attrs.axes == std::vector<int64_t>{1});
        CHECK(r[0]->shape == S({512, 1}));
        CHECK(r[1]->inputs[0] == r[0]);
        CHECK(r[0]->loc == "model.py:7");  // both steps are the user's line
        CHECK(r[1]->loc == "model.py:7");
        CHECK(p.outputs[0]->shape == S({}));
        const bool exact = t != DType::f32 || op == Op::ReduceMax || op == Op::ReduceMin;
        check_same_semantics(g, p, exact ? 0 : 1e-6);
        CHECK(run_pipeline(p).structural_hash() == p.structural_hash());
      }
      {  // 1-d: viewed as [256, 1024] first; keepdims keeps the output's shape
        NodePtr x = make_input(0, t, S({1 << 18}));
        Graph g = graph_of({x}, {make_reduce(op, x, {0}, true)});
        Graph p = run_pipeline(g);
        INFO(print(p));
        auto r = reductions(p);
        REQUIRE(r.size() == 2);
        REQUIRE(r[0]->inputs[0]->op == Op::Reshape);
        CHECK(r[0]->inputs[0]->shape == S({256, 1024}));
        CHECK(p.outputs[0]->shape == S({1}));
        const bool exact = t != DType::f32 || op == Op::ReduceMax || op == Op::ReduceMin;
        check_same_semantics(g, p, exact ? 0 : 1e-6);
      }
    }
  }
}

TEST_CASE("split_reductions: leaves alone what would not gain", "[ir][passes][split]") {
  auto reductions_after = [](const Shape& s, std::vector<int64_t> axes, bool tag = false,
                             DType t = DType::f32) {
    NodePtr x = make_input(0, t, s);
    NodePtr r = make_reduce(Op::ReduceSum, x, std::move(axes), true);
    if (tag) r = tag_composite(r, Composite::softmax);
    return reductions(run_pipeline(graph_of({x}, {r}))).size();
  };
  CHECK(reductions_after(S({1 << 18}), {0}) == 2);           // the split itself, for contrast
  CHECK(reductions_after(S({(1 << 18) + 16}), {0}) == 2);    // 262160 = 16 * 16385
  CHECK(reductions_after(S({1 << 17}), {0}) == 1);           // too small to share
  CHECK(reductions_after(S({(1 << 18) + 3}), {0}) == 1);     // no divisor in [16, 256]
  CHECK(reductions_after(S({2, 1 << 18}), {0, 1}) == 1);     // no leading axes of 16 or more
  CHECK(reductions_after(S({8192, 32}), {0, 1}) == 1);       // partials of fewer than 1024
  CHECK(reductions_after(S({512, 1024}), {1}) == 1);         // not every axis: already parallel
  CHECK(reductions_after(S({1 << 18}), {0}, true) == 1);     // part of a composite
  CHECK(reductions_after(S({4, 8, 8192}), {0, 1, 2}) == 2);  // leading 4 * 8 = 32 partials
  // A symbolic extent: the shape is known only at the call.
  NodePtr x = make_input(0, DType::f32, Shape{Dim::symbol(0), Dim::concrete(1 << 18)});
  Graph g = graph_of({x}, {make_reduce(Op::ReduceSum, x, {0, 1}, true)});
  CHECK(reductions(run_pipeline(g)).size() == 1);
}
