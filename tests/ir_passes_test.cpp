// Graph passes: the printer (golden), constant folding against the interpreter, CSE, DCE, the
// verifier's errors, vector_matmul, and the pipeline preserving semantics. The simplification
// rules: ir_simplify_test.cpp.
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

// ---------------------------------------------------------------------------------------------
// Printer

TEST_CASE("print: golden output of a small softmax-like graph", "[ir][passes][print]") {
  NodePtr x = make_input(0, DType::f32, S({4, 8}));
  NodePtr b = make_input(1, DType::f32, S({8}));
  NodePtr a = make_binary(Op::Add, x, b);
  NodePtr e = make_unary(Op::Exp, a);
  NodePtr s = make_reduce(Op::ReduceSum, e, {1}, true);
  NodePtr d = tag_composite(make_binary(Op::Div, e, s), Composite::softmax);
  NodePtr m = make_binary(Op::Mul, d, make_scalar(1.5, DType::f32));
  NodePtr t = make_permute(m, {1, 0});
  Graph g = graph_of({x, b}, {t, s});
  const std::string want =
      "%0 = input[arg=0] : f32[4,8]\n"
      "%1 = input[arg=1] : f32[8]\n"
      "%2 = expand(%1) : f32[4,8]\n"
      "%3 = add(%0, %2) : f32[4,8]\n"
      "%4 = exp(%3) : f32[4,8]\n"
      "%5 = sum(%4) axes=[1] : f32[4,1]\n"
      "%6 = expand(%5) : f32[4,8]\n"
      "%7 = div(%4, %6) : f32[4,8] #softmax\n"
      "%8 = constant 1.5 : f32[]\n"
      "%9 = expand(%8) : f32[4,8]\n"
      "%10 = mul(%7, %9) : f32[4,8]\n"
      "%11 = permute(%10) perm=[1,0] : f32[8,4]\n"
      "return %11, %5\n";
  CHECK(print(g) == want);
  // Deterministic: the same structure built again prints the same text.
  CHECK(print(cse(g)) == want);
}

TEST_CASE("print: constants, attributes and dtypes", "[ir][passes][print]") {
  NodePtr x = make_input(0, DType::i32, S({2, 3}));
  NodePtr small = make_constant(DType::i32, S({3}), std::vector<uint8_t>(12, 0));
  NodePtr big = f32_constant(std::vector<float>(64, 0.25f), S({8, 8}));
  NodePtr sl = make_slice(x, {1, 2}, {1, -1}, S({1, 3}));
  NodePtr cat = make_concat({x, sl}, 0);
  Graph g = graph_of({x}, {make_binary(Op::Add, x, small), big, cat, make_scalar(1.0, DType::f64),
                           make_scalar(3, DType::i64), make_scalar(1, DType::boolean)});
  const std::string text = print(g);
  INFO(text);
  CHECK(text.find("constant [0, 0, 0] : i32[3]") != std::string::npos);
  CHECK(text.find(" elements> : f32[8,8]") != std::string::npos);
  CHECK(text.find("64 elements>") != std::string::npos);
  CHECK(text.find("constant <hash ") != std::string::npos);
  CHECK(text.find("slice(%0) starts=[1,2] steps=[1,-1] : i32[1,3]") != std::string::npos);
  CHECK(text.find("concat(%0, %") != std::string::npos);
  CHECK(text.find("axis=0 : i32[3,3]") != std::string::npos);
  CHECK(text.find("constant 1.0 : f64[]") != std::string::npos);
  CHECK(text.find("constant 3 : i64[]") != std::string::npos);
  CHECK(text.find("constant true : bool[]") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Constant folding

TEST_CASE("constant_fold: gives the interpreter's values", "[ir][passes][fold]") {
  NodePtr c1 = f32_constant({0.5f, -1.f, 2.f, 3.25f, 0.f, -7.5f}, S({2, 3}));
  NodePtr c2 = make_scalar(0.1, DType::f32);
  NodePtr e = make_unary(Op::Exp, make_binary(Op::Add, c1, c2));
  NodePtr s = make_reduce(Op::ReduceSum, e, {1}, false);
  NodePtr h = make_cast(make_permute(e, {1, 0}), DType::f16);
  NodePtr i = make_cast(make_binary(Op::Mul, c1, make_scalar(3, DType::f32)), DType::i32);
  NodePtr x = make_input(0, DType::f32, S({2}));
  NodePtr mixed = make_binary(Op::Add, x, s);  // depends on an input: not folded
  Graph before = graph_of({x}, {s, h, i, mixed});
  Graph after = constant_fold(before);
  verify(after);
  CHECK(after.outputs[0]->op == Op::Constant);
  CHECK(after.outputs[1]->op == Op::Constant);
  CHECK(after.outputs[2]->op == Op::Constant);
  CHECK(after.outputs[1]->dtype == DType::f16);
  CHECK(after.outputs[2]->dtype == DType::i32);
  REQUIRE(after.outputs[3]->op == Op::Add);
  CHECK(after.outputs[3]->inputs[1]->op == Op::Constant);
  check_same_semantics(before, after);
  // Exactly the interpreter's values, bit for bit after rounding to the dtype.
  const auto want = interpret(before, {HostTensor{DType::f32, {2}, {1.0, 2.0}, {}}});
  for (int o = 0; o < 3; ++o)
    for (int64_t k = 0; k < numel(after.outputs[o]->shape); ++k)
      CHECK(after.outputs[o]->constant_at(k) == want[o].values[k]);
}

TEST_CASE("constant_fold: integer constants past 2^53 fold exactly", "[ir][passes][fold]") {
  // 2^60 + 1 and 3^35 have no double: folded through doubles, their sum, product and max lost
  // their low bits (and an int32 square its wrapped value).
  const std::vector<int64_t> v = {(int64_t{1} << 60) + 1, 50031545098999707};
  std::vector<uint8_t> bytes(16);
  std::memcpy(bytes.data(), v.data(), 16);
  NodePtr c = make_constant(DType::i64, S({2}), bytes);
  NodePtr sum = make_binary(Op::Add, c, make_scalar(2, DType::i64));
  NodePtr prod = make_binary(Op::Mul, c, make_scalar(3, DType::i64));
  NodePtr top = make_reduce(Op::ReduceMax, c, {0}, false);
  const int32_t m = 2147483647;
  std::vector<uint8_t> b32(4);
  std::memcpy(b32.data(), &m, 4);
  NodePtr sq = make_unary(Op::Square, make_constant(DType::i32, S({1}), b32));
  Graph after = constant_fold(graph_of({}, {sum, prod, top, sq}));
  for (const NodePtr& o : after.outputs) REQUIRE(o->op == Op::Constant);
  CHECK(after.outputs[0]->constant_int_at(0) == v[0] + 2);
  CHECK(after.outputs[0]->constant_int_at(1) == v[1] + 2);
  CHECK(after.outputs[1]->constant_int_at(0) == v[0] * 3);
  CHECK(after.outputs[1]->constant_int_at(1) == v[1] * 3);
  CHECK(after.outputs[2]->constant_int_at(0) == v[0]);
  CHECK(after.outputs[3]->constant_int_at(0) == 1);  // (2^31 - 1)^2 wraps to 1 in int32
}

TEST_CASE("constant_fold: broadcasts stay lazy and large results are not folded",
          "[ir][passes][fold]") {
  NodePtr x = make_input(0, DType::f32, S({300, 300}));
  NodePtr full = make_full_like(2.0, x);                            // expand(constant 2.0)
  NodePtr big = make_unary(Op::Exp, full);                          // 90000 elements
  NodePtr small = make_reduce(Op::ReduceMax, full, {0, 1}, false);  // 1 element, folds
  Graph g = constant_fold(graph_of({x}, {full, big, small}));
  CHECK(g.outputs[0] == full);
  CHECK(g.outputs[0]->op == Op::Expand);
  CHECK(g.outputs[1]->op == Op::Exp);
  REQUIRE(g.outputs[2]->op == Op::Constant);
  CHECK(g.outputs[2]->constant_at(0) == 2.0);
  // 65536 elements exactly still folds.
  NodePtr y = make_input(0, DType::f32, S({256, 256}));
  Graph g2 = constant_fold(graph_of({y}, {make_unary(Op::Neg, make_full_like(1.0, y))}));
  REQUIRE(g2.outputs[0]->op == Op::Constant);
  CHECK(g2.outputs[0]->constant_at(65535) == -1.0);
}

// ---------------------------------------------------------------------------------------------
// CSE and DCE

TEST_CASE("cse: duplicated subexpressions become one node", "[ir][passes][cse]") {
  NodePtr x = make_input(0, DType::f32, S({4, 8}));
  auto branch = [&] {
    NodePtr m = make_reduce(Op::ReduceMax, x, {1}, true);
    return make_unary(Op::Exp, make_binary(Op::Sub, x, m));
  };
  NodePtr a = branch(), b = branch();
  REQUIRE(a != b);
  Graph g = graph_of({x}, {make_binary(Op::Add, a, b), a});
  Graph out = cse(g);
  verify(out);
  // x, max, expand, sub, exp, add: the second branch's 4 nodes are gone.
  CHECK(count_nodes(g) == 10);
  CHECK(count_nodes(out) == 6);
  CHECK(out.outputs[0]->inputs[0] == out.outputs[0]->inputs[1]);
  CHECK(out.outputs[1] == out.outputs[0]->inputs[0]);
  check_same_semantics(g, out);
  // Equal scalar constants merge too; different ones do not.
  Graph k = cse(graph_of(
      {}, {make_scalar(2, DType::f32), make_scalar(2, DType::f32), make_scalar(3, DType::f32)}));
  CHECK(k.outputs[0] == k.outputs[1]);
  CHECK(k.outputs[0] != k.outputs[2]);
  // Different tags are different nodes.
  NodePtr e = make_unary(Op::Exp, x);
  Graph t = cse(graph_of({x}, {e, tag_composite(e, Composite::softmax)}));
  CHECK(t.outputs[0] != t.outputs[1]);
}

TEST_CASE("dce: only what the outputs reach is kept, inputs stay in order", "[ir][passes][dce]") {
  NodePtr x = make_input(0, DType::f32, S({4}));
  NodePtr y = make_input(1, DType::f32, S({4}));
  NodePtr used = make_unary(Op::Exp, x);
  NodePtr dead = make_unary(Op::Log, make_binary(Op::Add, x, y));
  Graph g = graph_of({x, y}, {used});
  // Simplify drops `x * 1`; the old multiply and its constants are no longer in the graph.
  Graph before = graph_of({x, y}, {make_binary(Op::Mul, used, make_scalar(1, DType::f32))});
  Graph out = dce(simplify(before));
  CHECK(count_nodes(before) == 6);
  CHECK(count_nodes(out) == 3);  // x, y (unused but an argument), exp
  REQUIRE(out.inputs.size() == 2);
  CHECK(out.inputs[0] == x);
  CHECK(out.inputs[1] == y);
  for (const NodePtr& n : dce(g).topo_order()) CHECK(n != dead);
  CHECK(print(out) ==
        "%0 = input[arg=0] : f32[4]\n"
        "%1 = input[arg=1] : f32[4]\n"
        "%2 = exp(%0) : f32[4]\n"
        "return %2\n");
}

// ---------------------------------------------------------------------------------------------
// Verify

namespace {

// The CompileError message verify gives for a graph returning `bad`, or "" when it passes.
std::string verify_error(std::vector<NodePtr> inputs, NodePtr bad) {
  try {
    verify(graph_of(std::move(inputs), {std::move(bad)}));
  } catch (const CompileError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("verify: accepts what the factories build", "[ir][passes][verify]") {
  NodePtr x = make_input(0, DType::f32, S({2, 3, 8, 8}));
  NodePtr w = make_input(1, DType::f32, S({4, 3, 3, 3}));
  Conv2dParams p;
  p.padding[0] = p.padding[1] = 1;
  NodePtr conv = make_conv2d(x, w, p);
  NodePtr rhs = make_input(2, DType::f32, S({64, 5}));
  NodePtr mm = make_matmul(make_reshape(conv, S({2, 4, 64})), rhs);
  NodePtr cat = make_concat({mm, mm}, -1);
  NodePtr red = make_reduce(Op::ReduceMean, make_cast(cat, DType::i32), {0, 2}, false);
  NodePtr wh = make_where(make_binary(Op::Gt, red, make_scalar(0, DType::f64)), red,
                          make_scalar(1, DType::f64));
  NodePtr sl = make_slice(wh, {3}, {-2}, S({2}));
  Graph g = graph_of({x, w, rhs}, {sl, make_permute(cat, {2, 0, 1})});
  CHECK_NOTHROW(verify(g));
  CHECK_NOTHROW(verify(run_pipeline(g)));
}

TEST_CASE("verify: rejects malformed nodes with CompileError naming them", "[ir][passes][verify]") {
  NodePtr x = make_input(0, DType::f32, S({4, 8}));
  NodePtr v = make_input(1, DType::f32, S({8}));
  NodePtr i = make_input(1, DType::i32, S({4, 8}));
  std::vector<NodePtr> xs{x}, xv{x, v}, xi{x, i};

  std::string msg = verify_error(xv, make_node(Op::Add, DType::f32, S({4, 8}), {x, v}));
  CHECK(msg.find("%2 = add(%0, %1) : f32[4,8]") != std::string::npos);
  CHECK(msg.find("[8]") != std::string::npos);
  CHECK(verify_error(xi, make_node(Op::Mul, DType::f32, S({4, 8}), {x, i})).find("dtypes differ") !=
        std::string::npos);
  CHECK(verify_error(xs, make_node(Op::Exp, DType::f32, S({4, 8}), {x, x})).find("takes 1") !=
        std::string::npos);
  CHECK(verify_error(xs, make_node(Op::Lt, DType::f32, S({4, 8}), {x, x})) != "");
  CHECK(verify_error(xi, make_node(Op::Div, DType::i32, S({4, 8}), {i, i})) != "");
  CHECK(verify_error(xs, make_node(Op::Where, DType::f32, S({4, 8}), {x, x, x}))
            .find("condition must be bool") != std::string::npos);
  CHECK(verify_error(xs, make_node(Op::Expand, DType::f32, S({4, 16}), {x})).find("broadcast") !=
        std::string::npos);
  CHECK(
      verify_error(xs, make_node(Op::Reshape, DType::f32, S({5, 7}), {x})).find("element count") !=
      std::string::npos);
  Attrs perm;
  perm.perm = {0, 0};
  CHECK(verify_error(xs, make_node(Op::Permute, DType::f32, S({4, 4}), {x}, perm))
            .find("not a permutation") != std::string::npos);
  perm.perm = {1, 0};
  CHECK(verify_error(xs, make_node(Op::Permute, DType::f32, S({4, 8}), {x}, perm)) != "");
  Attrs sl;
  sl.starts = {0, 6};
  sl.steps = {1, 1};
  CHECK(verify_error(xs, make_node(Op::Slice, DType::f32, S({4, 3}), {x}, sl)).find("outside") !=
        std::string::npos);
  sl.steps = {1, 0};
  CHECK(verify_error(xs, make_node(Op::Slice, DType::f32, S({4, 1}), {x}, sl)).find("step 0") !=
        std::string::npos);
  Attrs ax;
  ax.axes = {1, 0};
  CHECK(verify_error(xs, make_node(Op::ReduceSum, DType::f32, S({1, 1}), {x}, ax)).find("sorted") !=
        std::string::npos);
  ax.axes = {2};
  CHECK(verify_error(xs, make_node(Op::ReduceSum, DType::f32, S({4, 1}), {x}, ax)) != "");
  ax.axes = {1};
  CHECK(verify_error(xs, make_node(Op::ReduceMax, DType::f32, S({4}), {x}, ax)).find("keepdims") !=
        std::string::npos);
  CHECK(
      verify_error(xs, make_node(Op::MatMul, DType::f32, S({4, 4}), {x, x})).find("contraction") !=
      std::string::npos);
  NodePtr img = make_input(0, DType::f32, S({1, 3, 8, 8}));
  NodePtr ker = make_input(1, DType::f32, S({4, 2, 3, 3}));
  CHECK(verify_error({img, ker}, make_node(Op::Conv2d, DType::f32, S({1, 4, 6, 6}), {img, ker}))
            .find("channels") != std::string::npos);
  NodePtr ker3 = make_input(1, DType::f32, S({4, 3, 3, 3}));
  CHECK(verify_error({img, ker3}, make_node(Op::Conv2d, DType::f32, S({1, 4, 8, 8}), {img, ker3}))
            .find("result shape") != std::string::npos);
  Attrs cat;
  cat.axis = 0;
  CHECK(verify_error(xv, make_node(Op::Concat, DType::f32, S({12, 8}), {x, v}, cat)) != "");
  CHECK(verify_error(xs, make_node(Op::Concat, DType::f32, S({9, 8}), {x, x}, cat))
            .find("sum to 8") != std::string::npos);
  // Inputs: arg out of range, and an Input node that is not the graph's input at its position.
  CHECK(verify_error(xs, make_input(3, DType::f32, S({4}))).find("out of range") !=
        std::string::npos);
  CHECK(verify_error(xs, make_unary(Op::Neg, make_input(0, DType::f32, S({4, 8}))))
            .find("not the graph's input") != std::string::npos);
  CHECK_THROWS_AS(verify(graph_of({v, x}, {x})), CompileError);
  // Constant payload of the wrong size.
  Attrs data;
  auto bytes = std::make_shared<ConstantData>();
  bytes->bytes.resize(12);
  data.data = bytes;
  CHECK(verify_error({}, make_node(Op::Constant, DType::f32, S({4}), {}, data)).find("12 bytes") !=
        std::string::npos);
  // The traced location is named when there is one.
  NodePtr located;
  {
    LocScope loc("train.py:7");
    located = make_node(Op::Add, DType::f32, S({4, 8}), {x, v});
  }
  CHECK(verify_error(xv, located).find("train.py:7") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Pipeline

TEST_CASE("vector_matmul: W @ v runs as a row product, its reshape sinks below the epilogue",
          "[ir][passes][vector_matmul]") {
  NodePtr w = make_input(0, DType::f32, S({2, 6, 5}));  // batched W
  NodePtr v = make_input(1, DType::f32, S({5}));
  NodePtr b = make_input(2, DType::f32, S({6}));
  NodePtr u = make_input(3, DType::f32, S({6}));
  NodePtr gelu_in;
  {
    LocScope loc("model.py:3");
    // relu(W @ v + b) * 2, gelu-tagged root over u @ W[0] (an elementwise composite), W @ v alone.
    NodePtr y = make_matmul(w, v);  // [2, 6]
    NodePtr e = make_binary(
        Op::Mul, make_unary(Op::Relu, make_binary(Op::Add, y, make_expand(b, S({2, 6})))),
        make_expand(make_scalar(2, DType::f32), S({2, 6})));
    NodePtr z = make_matmul(u, make_slice(w, {0, 0, 0}, {1, 1, 1}, S({1, 6, 5})));  // [1, 5]
    NodePtr t = tag_composite(make_unary(Op::Tanh, z), Composite::gelu);
    Graph g = graph_of({w, v, b, u}, {e, t, make_matmul(w, v)});
    Graph p = run_pipeline(g);
    INFO(print(g) << "--- after ---\n" << print(p));
    // Each output: a unit reshape of the value computed at the matmul's shape.
    for (const NodePtr& o : p.outputs) REQUIRE(o->op == Op::Reshape);
    const NodePtr& mul = p.outputs[0]->inputs[0];
    CHECK(mul->op == Op::Mul);
    CHECK(mul->shape == S({2, 1, 6}));
    CHECK(mul->loc == "model.py:3");
    REQUIRE(mul->inputs[0]->op == Op::Relu);
    const NodePtr& add = mul->inputs[0]->inputs[0];
    REQUIRE(add->op == Op::Add);
    const NodePtr& mm = add->inputs[0];
    REQUIRE(mm->op == Op::MatMul);
    CHECK(mm->shape == S({2, 1, 6}));         // v^T @ W^T
    CHECK(mm->inputs[1]->op == Op::Permute);  // W read transposed
    CHECK(p.outputs[1]->inputs[0]->tag == Composite::gelu);
    CHECK(p.outputs[1]->inputs[0]->inputs[0]->op == Op::MatMul);
    CHECK(p.outputs[2]->inputs[0] == mm);  // the same product, once
    check_same_semantics(g, p);
    CHECK(run_pipeline(p).structural_hash() == p.structural_hash());
  }
}

TEST_CASE("vector_matmul: only a float32 W @ v becomes a row product",
          "[ir][passes][vector_matmul]") {
  // Other dtypes run on the LLVM loop nest, which is fast in the column orientation only.
  for (DType t : {DType::f64, DType::i32, DType::bf16}) {
    NodePtr w = make_input(0, t, S({6, 5}));
    NodePtr v = make_input(1, t, S({5}));
    Graph g = graph_of({w, v}, {make_matmul(w, v)});
    Graph p = run_pipeline(g);
    INFO(print(p));
    REQUIRE(p.outputs[0]->op == Op::Reshape);
    const NodePtr& mm = p.outputs[0]->inputs[0];
    REQUIRE(mm->op == Op::MatMul);
    CHECK(mm->shape == S({6, 1}));
    CHECK(mm->inputs[0] == w);
  }
}

TEST_CASE("vector_matmul: leaves other reshapes and broadcast operands alone",
          "[ir][passes][vector_matmul]") {
  NodePtr x = make_input(0, DType::f32, S({4, 6}));
  NodePtr a = make_input(1, DType::f32, S({3, 4}));
  NodePtr v = make_input(2, DType::f32, S({6}));
  // A reshape of a non-matmul, and a matmul's reshape that is not a unit reshape.
  NodePtr r1 = make_unary(Op::Exp, make_reshape(x, S({1, 24})));
  NodePtr r2 = make_unary(Op::Exp, make_reshape(make_matmul(a, x), S({2, 9})));
  // A vector product that the epilogue broadcasts (its input shape differs from the op's).
  NodePtr r3 = make_binary(Op::Add, make_expand(make_matmul(x, v), S({2, 4})),
                           make_input(3, DType::f32, S({2, 4})));
  Graph g = graph_of({x, a, v, r3->inputs[1]}, {r1, r2, r3});
  Graph p = run_pipeline(g);
  INFO(print(p));
  CHECK(p.outputs[0]->op == Op::Exp);
  CHECK(p.outputs[1]->op == Op::Exp);
  CHECK(p.outputs[2]->op == Op::Add);
  check_same_semantics(g, p);
}

TEST_CASE("pipeline: preserves semantics and reaches a fixed point", "[ir][passes][pipeline]") {
  NodePtr x = make_input(0, DType::f32, S({3, 5}));
  NodePtr y = make_input(1, DType::f32, S({5}));
  NodePtr n = make_input(2, DType::i32, S({3, 5}));

  SECTION("identities, constants and duplicates") {
    NodePtr k = make_unary(Op::Sqrt, make_binary(Op::Add, make_scalar(3, DType::f32),
                                                 make_scalar(1, DType::f32)));  // folds to 2
    NodePtr a = make_binary(Op::Mul, make_binary(Op::Add, x, make_scalar(0, DType::f32)), k);
    NodePtr b = make_binary(Op::Mul, make_binary(Op::Add, x, make_scalar(0, DType::f32)), k);
    NodePtr out = make_binary(Op::Sub, make_binary(Op::Add, a, b), make_binary(Op::Mul, y, x));
    Graph g = graph_of({x, y, n}, {out, make_binary(Op::Mul, n, make_scalar(1, DType::i32))});
    Graph p = run_pipeline(g);
    INFO(print(g) << "--- after ---\n" << print(p));
    CHECK(count_nodes(p) < count_nodes(g));
    CHECK(p.outputs[1] == n);
    CHECK(count_op(p, Op::Sqrt) == 0);
    CHECK(count_op(p, Op::Add) == 1);
    check_same_semantics(g, p);
    CHECK(run_pipeline(p).structural_hash() == p.structural_hash());
  }
  SECTION("views and casts") {
    NodePtr t = make_permute(
        make_permute(make_reshape(make_reshape(x, S({15})), S({5, 3})), {1, 0}), {1, 0});
    NodePtr c = make_cast(make_cast(make_cast(t, DType::f64), DType::f32), DType::f16);
    NodePtr e = make_expand(make_expand(make_reshape(y, S({1, 5})), S({3, 5})), S({2, 3, 5}));
    NodePtr m = make_matmul(make_permute(make_reshape(make_cast(n, DType::f32), S({5, 3})), {1, 0}),
                            make_permute(x, {1, 0}));
    Graph g = graph_of({x, y, n}, {c, e, softmax_of(x), m});
    Graph p = run_pipeline(g);
    INFO(print(g) << "--- after ---\n" << print(p));
    CHECK(count_op(p, Op::Permute) == 2);
    CHECK(count_op(p, Op::Cast) == 2);  // f32 -> f16 and i32 -> f32
    check_same_semantics(g, p);
  }
}

TEST_CASE("pipeline: deep graphs do not recurse", "[ir][passes][pipeline]") {
  NodePtr x = make_input(0, DType::f32, S({2}));
  NodePtr cur = x;
  const NodePtr one = make_scalar(1, DType::f32);
  for (int i = 0; i < 20000; ++i) {
    cur = make_binary(Op::Mul, cur, one);
    cur = make_unary(Op::Neg, make_unary(Op::Neg, cur));
  }
  cur = make_unary(Op::Exp, cur);
  Graph p = run_pipeline(graph_of({x}, {cur}));
  CHECK(count_nodes(p) == 2);
  CHECK(print(p) == "%0 = input[arg=0] : f32[2]\n%1 = exp(%0) : f32[2]\nreturn %1\n");
}
