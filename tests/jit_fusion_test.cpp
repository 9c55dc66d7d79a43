// Fusion tests: the composite ops and elementwise chains compile to the number of kernels the
// fusion pass promises (softmax, layer_norm, rms_norm and a 5-op chain: one kernel each), and the
// fused patterns, including reductions broadcast back (`x.sum(1)[:, None] + y`), stay correct.
#include "jit_test_util.h"
#include "needs_llvm.h"

using namespace jt;
using kiln::Index;
using kiln::Tensor;

namespace {

std::string kernels_str(const kiln::Inspection& ins) {
  std::string s = "graph:\n" + ins.graph + "\nkernels:";
  for (const auto& k : ins.kernels) {
    s += "\n  " + k.name + " (" + k.backend + "):";
    for (const auto& op : k.ops) s += " " + op;
  }
  return s;
}

template <typename F>
void expect_kernels(F fn, const std::vector<TestArray>& ins, size_t n, const std::string& what,
                    double tol_scale = 1) {
  kiln::Function f = kiln::jit(fn);
  kiln::Inspection insp = f.inspect(arrays_of(ins));
  INFO(what << "\n" << kernels_str(insp));
  CHECK(insp.kernels.size() == n);
  check_against_reference(fn, ins, {.tol_scale = tol_scale, .label = what, .function = &f});
}

}  // namespace

TEST_CASE("jit fusion: softmax, log_softmax, layer_norm, rms_norm are one kernel each",
          "[jit][fusion]" KILN_NEEDS_LLVM) {
  Rng rng(1);
  for (auto shape : std::vector<std::vector<int64_t>>{{64, 130}, {7, 33}, {1, 1}, {3, 5, 17}}) {
    TestArray x = make_array(rng, shape, DType::f32, Layout::contiguous, Values::wide);
    TestArray w = make_array(rng, {shape.back()}, DType::f32);
    TestArray b = make_array(rng, {shape.back()}, DType::f32);
    std::string s = dims_str(shape);
    expect_kernels([](Tensor a) { return kiln::softmax(a); }, {x}, 1, "softmax " + s, 12);
    expect_kernels([](Tensor a) { return kiln::log_softmax(a); }, {x}, 1, "log_softmax " + s, 12);
    expect_kernels([](Tensor a) { return kiln::layer_norm(a); }, {x}, 1, "layer_norm " + s, 12);
    expect_kernels([](Tensor a, Tensor ww, Tensor bb) { return kiln::layer_norm(a, ww, bb); },
                   {x, w, b}, 1, "layer_norm with weight and bias " + s, 12);
    expect_kernels([](Tensor a) { return kiln::rms_norm(a); }, {x}, 1, "rms_norm " + s, 12);
    expect_kernels([](Tensor a, Tensor ww) { return kiln::rms_norm(a, ww); }, {x, w}, 1,
                   "rms_norm with weight " + s, 12);
  }
  // Also on a strided input and on float16.
  TestArray xs = make_array(rng, {33, 65}, DType::f32, Layout::strided, Values::wide);
  expect_kernels([](Tensor a) { return kiln::softmax(a); }, {xs}, 1, "softmax strided", 12);
  TestArray xh = make_array(rng, {33, 65}, DType::f16, Layout::contiguous, Values::wide);
  expect_kernels([](Tensor a) { return kiln::layer_norm(a); }, {xh}, 1, "layer_norm f16", 12);
}

TEST_CASE("jit fusion: a 5-op elementwise chain is one kernel", "[jit][fusion]" KILN_NEEDS_LLVM) {
  Rng rng(2);
  for (Layout lay : {Layout::contiguous, Layout::strided, Layout::transposed}) {
    TestArray x = make_array(rng, {130, 33}, DType::f32, lay);
    TestArray y = make_array(rng, {130, 33}, DType::f32);
    TestArray b = make_array(rng, {33}, DType::f32);
    expect_kernels(
        [](Tensor a, Tensor c, Tensor bb) { return kiln::tanh((a * c + bb) * 0.5 - 1.0); },
        {x, y, b}, 1, std::string("5-op chain ") + layout_name(lay));
    expect_kernels(
        [](Tensor a, Tensor c) {
          return kiln::sigmoid(kiln::exp(a) * c - kiln::relu(a)) / (kiln::abs(c) + 1.0);
        },
        {x, y}, 1, std::string("7-op chain ") + layout_name(lay));
  }
  // Broadcasts and views inside the chain stay in one kernel.
  TestArray x = make_array(rng, {17, 9}, DType::f32);
  TestArray col = make_array(rng, {17, 1}, DType::f32);
  expect_kernels([](Tensor a, Tensor c) { return kiln::maximum(a.T() * 2.0, 0.0 - c.T()) + 1.0; },
                 {x, col}, 1, "chain with transposes and a broadcast");
}

TEST_CASE("jit fusion: a 20000-op chain runs as kernels of at most 256 ops",
          "[jit][fusion]" KILN_NEEDS_LLVM) {
  // One fused group of 20000 ops overflowed the stack in the LLVM lowering (SIGSEGV). int32
  // (wrapping) keeps every step exact in kiln and in the interpreter alike.
  Rng rng(3);
  TestArray x = make_array(rng, {3, 5}, DType::i32);
  auto chain = [](Tensor a) {
    for (int i = 0; i < 10000; ++i) a = a * 3 + 1;
    return a;
  };
  kiln::Function f = kiln::jit(chain);
  kiln::Inspection insp = f.inspect(arrays_of({x}));
  CHECK(insp.kernels.size() >= 20000 / 256);
  for (const auto& k : insp.kernels)  // computed ops; the constants and their broadcasts join each
    CHECK(std::count(k.ops.begin(), k.ops.end(), "add") +
              std::count(k.ops.begin(), k.ops.end(), "mul") <=
          256);
  check_against_reference(chain, {x}, {.label = "20000-op chain", .function = &f});
}

TEST_CASE("jit fusion: reductions broadcast back into elementwise work",
          "[jit][fusion]" KILN_NEEDS_LLVM) {
  Rng rng(3);
  TestArray x = make_array(rng, {33, 17}, DType::f32, Layout::negative);
  TestArray y = make_array(rng, {33, 17}, DType::f32);
  check_against_reference(
      [](Tensor a, Tensor b) {
        return a.sum(1).index({Index::slice(), Index::new_axis()}) + b;
      },
      {x, y}, {.tol_scale = 17, .label = "x.sum(1)[:, None] + y"});
  check_against_reference(
      [](Tensor a, Tensor b) {
        return a.sum(0).index({Index::new_axis(), Index::slice()}) * b;
      },
      {x, y}, {.tol_scale = 33, .label = "x.sum(0)[None, :] * y"});
  check_against_reference([](Tensor a, Tensor b) { return a - a.max(1, true) + b.mean(1, true); },
                          {x, y},
                          {.tol_scale = 17, .label = "two row reductions of different inputs"});
  check_against_reference(
      [](Tensor a, Tensor b) {
        Tensor s = (a * b).sum(1, true);
        return std::vector<Tensor>{s, a / (s * s + 1.0), (a / (s * s + 1.0)).sum(1)};
      },
      {x, y}, {.tol_scale = 17 * 4, .label = "reduction reused before and after"});
  check_against_reference([](Tensor a, Tensor b) { return a.sum(0, true) + b.sum(1, true); },
                          {x, y},
                          {.tol_scale = 33, .label = "column sum + row sum (outer broadcast)"});
  check_against_reference(
      [](Tensor a, Tensor b) { return kiln::softmax(a, 0) + kiln::softmax(b, 1); }, {x, y},
      {.tol_scale = 8, .label = "softmax over different axes added"});
  check_against_reference([](Tensor a, Tensor b) { return (a.sum(1) + b.max(1)).sum(); }, {x, y},
                          {.tol_scale = 33 * 17, .label = "reduction of reductions"});
  check_against_reference(
      [](Tensor a, Tensor b) {
        Tensor h = kiln::layer_norm(a + b);
        return kiln::gelu(h) * 2.0 + a;
      },
      {x, y}, {.tol_scale = 8, .label = "residual layer_norm + gelu"});
  check_against_reference(
      [](Tensor a) {
        return a.sum(0).index({Index::slice(), Index::new_axis()}).T().T() + a.sum(1);
      },
      {x}, {.tol_scale = 33, .label = "reduced vector transposed and broadcast"});
  check_against_reference([](Tensor a) { return kiln::softmax(a.T()).T() * a.max(); }, {x},
                          {.tol_scale = 8, .label = "softmax of a transpose, times a global max"});
  // A 3-d tensor reduced over its middle axis and broadcast back.
  TestArray z = make_array(rng, {5, 7, 9}, DType::f32, Layout::transposed);
  check_against_reference(
      [](Tensor a) {
        return a - a.mean(1, true) * kiln::sqrt(kiln::square(a).sum({0, 2}, true) + 1.0);
      },
      {z}, {.tol_scale = 45, .label = "middle-axis reductions broadcast back"});
}

TEST_CASE("jit fusion: the inspection lists each kernel's ops and backend",
          "[jit][fusion]" KILN_NEEDS_LLVM) {
  Rng rng(4);
  TestArray x = make_array(rng, {16, 32}, DType::f32);
  TestArray w = make_array(rng, {32, 8}, DType::f32);
  kiln::Function f =
      kiln::jit([](Tensor a, Tensor ww) { return kiln::softmax(kiln::matmul(a, ww)); });
  kiln::Inspection ins = f.inspect({x.array, w.array});
  INFO(kernels_str(ins));
  CHECK(!ins.graph.empty());
  CHECK(ins.kernels.size() <= 2);
  for (const auto& k : ins.kernels) {
    CHECK(!k.name.empty());
    CHECK(!k.key.empty());
    CHECK(!k.ops.empty());
    CHECK((k.backend == "llvm" || k.backend == "x86"));
  }
  // inspect does not count as a call or populate the call cache.
  CHECK(f.stats().calls == 0);
}

// A float16/bfloat16 output that another kernel reads: that kernel reads it exact, as the
// interpreter does (a float32 temp, copied into the output by a kernel of its own), not as
// stored rounded. With y = x + 0.1, y - x is 0.1 exact, where a y read back rounded is off by
// up to half of y's last place (1/256 at |y| near 8 in float16, 1/32 in bfloat16).
TEST_CASE("jit fusion: a narrow output that another kernel reads is read exact",
          "[jit][fusion]" KILN_NEEDS_LLVM) {
  Rng rng(4);
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    const size_t copy = t == DType::f32 ? 0 : 1;  // float32 outputs are read back as stored
    for (auto shape : std::vector<std::vector<int64_t>>{{37, 21}, {1, 1}, {0, 5}}) {
      TestArray x = make_array(rng, shape, t, Layout::contiguous, Values::wide);
      const std::string s = std::string(dtype_name(t)) + " " + dims_str(shape);
      expect_kernels(
          [](Tensor a) {
            Tensor y = a + 0.1;
            return std::vector<Tensor>{y, y - a};
          },
          {x}, 2 + copy, "y and y - x " + s);
      // The output a reshape of the value (a view whose base's kernel stores into the output,
      // float32 too): the base is read the same way.
      const std::vector<int64_t> with_unit = {1, shape[0], shape[1]};
      expect_kernels(
          [with_unit](Tensor a) {
            Tensor y = a + 0.1;
            return std::vector<Tensor>{y.reshape(with_unit), y - a};
          },
          {x}, 2 + copy, "y.reshape and y - x " + s);
      // Read by no other kernel: no copy.
      expect_kernels(
          [](Tensor a) {
            return std::vector<Tensor>{a + 0.1, a * 3.0};
          },
          {x}, 2, "two outputs " + s);
    }
  }
}
