// Error tests of the JIT (CONVENTIONS tier 4): each bad program or bad call gets its typed error
// with a message naming what was expected and what was given; the function stays usable after an
// error, and a failed trace is not cached.
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <atomic>

using namespace jt;
using Catch::Matchers::Contains;
using kiln::Tensor;

namespace {

Array f32_array(std::vector<int64_t> shape, Rng& rng, std::vector<TestArray>& keep,
                DType t = DType::f32) {
  keep.push_back(make_array(rng, std::move(shape), t));
  return keep.back().array;
}

// Expects `f(inputs)` to throw exactly E (or a subclass) whose message contains every needle.
template <typename E>
void expect_error(const kiln::Function& f, const std::vector<Array>& inputs,
                  const std::vector<std::string>& needles) {
  try {
    (void)f(inputs);
    FAIL("expected " << typeid(E).name() << ", nothing was thrown");
  } catch (const E& e) {
    std::string msg = e.what();
    INFO("message: " << msg);
    for (const auto& n : needles) CHECK_THAT(msg, Contains(n));
  } catch (const std::exception& e) {
    FAIL("expected " << typeid(E).name() << ", got another exception: " << e.what());
  }
}

}  // namespace

TEST_CASE("jit errors: add of shapes that do not broadcast is a ShapeError naming both",
          "[jit][errors]") {
  Rng rng(1);
  std::vector<TestArray> keep;
  kiln::Function f = kiln::jit([](Tensor a, Tensor b) { return a + b; });
  expect_error<kiln::ShapeError>(f, {f32_array({3, 4}, rng, keep), f32_array({5}, rng, keep)},
                                 {"[3,4]", "[5]", "add"});
  expect_error<kiln::ShapeError>(f, {f32_array({2, 3}, rng, keep), f32_array({3, 2}, rng, keep)},
                                 {"[2,3]", "[3,2]"});
}

TEST_CASE("jit errors: matmul with mismatched K", "[jit][errors]") {
  Rng rng(2);
  std::vector<TestArray> keep;
  kiln::Function f = kiln::jit([](Tensor a, Tensor b) { return kiln::matmul(a, b); });
  expect_error<kiln::ShapeError>(f, {f32_array({4, 5}, rng, keep), f32_array({6, 3}, rng, keep)},
                                 {"matmul", "5", "6"});
  expect_error<kiln::ShapeError>(f, {f32_array({5}, rng, keep), f32_array({4}, rng, keep)},
                                 {"matmul"});
  // Batch dims that do not broadcast.
  expect_error<kiln::ShapeError>(f,
                                 {f32_array({2, 4, 5}, rng, keep), f32_array({3, 5, 2}, rng, keep)},
                                 {"matmul", "[2]", "[3]"});
  // A 0-d operand.
  expect_error<kiln::ShapeError>(f, {f32_array({}, rng, keep), f32_array({3}, rng, keep)},
                                 {"matmul"});
  // bool operands are a dtype error.
  expect_error<kiln::DTypeError>(
      f,
      {f32_array({2, 2}, rng, keep, DType::boolean), f32_array({2, 2}, rng, keep, DType::boolean)},
      {"matmul", "bool"});
}

TEST_CASE("jit errors: bad axes", "[jit][errors]") {
  Rng rng(3);
  std::vector<TestArray> keep;
  Array x = f32_array({3, 4}, rng, keep);
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) { return a.sum(2); }), {x},
                                 {"axis 2", "2 dims"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) { return a.max(-3); }), {x}, {"-3"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return a.mean({0, 0});
                                 }),
                                 {x}, {"duplicate"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) { return kiln::softmax(a, 5); }), {x},
                                 {"softmax", "5"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a) { return kiln::layer_norm(a, {}, {}, -3); }), {x}, {"layer_norm"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return kiln::concatenate({a, a}, 2);
                                 }),
                                 {x}, {"concatenate"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return a.transpose({0, 0});
                                 }),
                                 {x}, {"transpose"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return a.transpose({1, 0, 2});
                                 }),
                                 {x}, {"transpose"});
  // max over an empty axis has no identity.
  Array e = f32_array({3, 0}, rng, keep);
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) { return a.max(1); }), {e}, {"zero-size"});
}

TEST_CASE("jit errors: other bad programs (reshape, broadcast_to, concatenate, index, params)",
          "[jit][errors]") {
  Rng rng(4);
  std::vector<TestArray> keep;
  Array x = f32_array({3, 4}, rng, keep);
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return a.reshape({5, 3});
                                 }),
                                 {x}, {"reshape", "[3,4]", "[5,3]"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return a.reshape({-1, -1});
                                 }),
                                 {x}, {"reshape"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return a.reshape({5, -1});
                                 }),
                                 {x}, {"reshape"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return kiln::broadcast_to(a, {3, 5});
                                 }),
                                 {x}, {"broadcast_to", "[3,4]", "[3,5]"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) { return kiln::broadcast_to(a, {4}); }),
                                 {x}, {"broadcast_to"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) {
                                   return kiln::concatenate({a, a.T()}, 0);
                                 }),
                                 {x}, {"concatenate", "[4,3]"});
  expect_error<kiln::ShapeError>(kiln::jit([](Tensor a) { return a.index({kiln::Index::at(3)}); }),
                                 {x}, {"out of bounds"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a) {
        return a.index({kiln::Index::at(0), kiln::Index::at(0), kiln::Index::at(0)});
      }),
      {x}, {"too many"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a) { return a.index({kiln::Index::slice({}, {}, 0)}); }), {x}, {"step"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a) {
        return a.index({kiln::Index::ellipsis(), kiln::Index::ellipsis()});
      }),
      {x}, {"ellipsis"});
  Array w = f32_array({3}, rng, keep);
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a, Tensor ww) { return kiln::layer_norm(a, ww); }), {x, w},
      {"layer_norm", "weight", "[4]", "[3]"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a, Tensor ww) { return kiln::rms_norm(a, ww); }), {x, w},
      {"rms_norm", "weight"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a, Tensor b) { return kiln::where(a > 0.0, a, b); }), {x, w}, {"where"});
}

TEST_CASE("jit errors: dtype errors", "[jit][errors]") {
  Rng rng(5);
  std::vector<TestArray> keep;
  Array b = f32_array({3}, rng, keep, DType::boolean);
  expect_error<kiln::DTypeError>(kiln::jit([](Tensor a) { return -a; }), {b}, {"bool"});
  expect_error<kiln::DTypeError>(kiln::jit([](Tensor a) { return kiln::relu(a); }), {b},
                                 {"relu", "bool"});
  expect_error<kiln::DTypeError>(kiln::jit([](Tensor a) { return a - a; }), {b}, {"sub", "bool"});
  // numpy refuses integers to a negative integer power (a float base or exponent is fine).
  Array i = f32_array({3}, rng, keep, DType::i32);
  expect_error<kiln::DTypeError>(kiln::jit([](Tensor a) { return kiln::pow(a, -2.0); }), {i},
                                 {"pow", "negative", "int32"});
  CHECK_THROWS_AS(kiln::dtype_from_name("float13"), kiln::DTypeError);
}

TEST_CASE("jit errors: conv2d channel mismatch and bad parameters", "[jit][errors]") {
  Rng rng(6);
  std::vector<TestArray> keep;
  Array x = f32_array({1, 3, 8, 8}, rng, keep);
  Array w4 = f32_array({2, 4, 3, 3}, rng, keep);
  Array w3 = f32_array({2, 3, 3, 3}, rng, keep);
  Array big = f32_array({2, 3, 9, 9}, rng, keep);
  Array bias = f32_array({5}, rng, keep);
  auto conv = [](kiln::Conv2dParams p) {
    return kiln::jit([p](Tensor a, Tensor ww) { return kiln::conv2d(a, ww, Tensor(), p); });
  };
  expect_error<kiln::ShapeError>(conv({}), {x, w4}, {"conv2d", "3 channels", "4"});
  expect_error<kiln::ShapeError>(conv({}), {x, big}, {"conv2d", "larger"});
  kiln::Conv2dParams g2;
  g2.groups = 2;
  expect_error<kiln::ShapeError>(conv(g2), {x, w3}, {"conv2d", "groups"});
  kiln::Conv2dParams s0;
  s0.stride[0] = 0;
  expect_error<kiln::ShapeError>(conv(s0), {x, w3}, {"conv2d", "stride"});
  kiln::Conv2dParams np;
  np.padding[1] = -1;
  expect_error<kiln::ShapeError>(conv(np), {x, w3}, {"conv2d"});
  expect_error<kiln::ShapeError>(conv({}), {f32_array({3, 8, 8}, rng, keep), w3},
                                 {"conv2d", "[3,8,8]"});
  expect_error<kiln::ShapeError>(
      kiln::jit([](Tensor a, Tensor ww, Tensor bb) { return kiln::conv2d(a, ww, bb); }),
      {x, w3, bias}, {"conv2d", "bias", "[5]"});
}

TEST_CASE("jit errors: wrong number of arguments is a kiln::Error",
          "[jit][errors]" KILN_NEEDS_LLVM) {
  Rng rng(7);
  std::vector<TestArray> keep;
  kiln::Function f = kiln::jit([](Tensor a, Tensor b) { return a * b; });
  Array x = f32_array({4}, rng, keep);
  expect_error<kiln::Error>(f, {x}, {"expected 2 arguments", "got 1"});
  expect_error<kiln::Error>(f, {x, x, x}, {"expected 2 arguments", "got 3"});
  expect_error<kiln::Error>(f, {}, {"got 0"});
  std::vector<Array> outs = {Array::empty({4}, DType::f32)};
  std::vector<Array> one = {x};
  CHECK_THROWS_AS(f.call(one, outs), kiln::Error);
  CHECK_THROWS_AS(f.inspect(one), kiln::Error);
  // The function still works.
  check_against_reference([](Tensor a, Tensor b) { return a * b; }, {keep[0], keep[0]},
                          {.label = "after arity errors", .function = &f});
}

TEST_CASE("jit errors: dynamic dims an argument does not have are a ShapeError at the call",
          "[jit][errors]" KILN_NEEDS_LLVM) {
  Rng rng(8);
  std::vector<TestArray> keep;
  Array x = f32_array({4, 3}, rng, keep);
  for (int d : {2, -3, 7}) {
    kiln::Options o;
    o.dynamic = kiln::DynamicMode::per_arg;
    o.dynamic_dims = {{1, {0}}, {0, {1, d}}};
    kiln::Function f = kiln::jit([](Tensor a, Tensor b) { return a + b; }, o);
    expect_error<kiln::ShapeError>(
        f, {x, x}, {"input 0 has 2 dims, so its dim " + std::to_string(d) + " does not exist"});
  }
  kiln::Options o;
  o.dynamic = kiln::DynamicMode::per_arg;
  o.dynamic_dims = {{0, {-2, 1}}};  // both dims, one counted from the end
  kiln::Function f = kiln::jit([](Tensor a) { return a * 2.0; }, o);
  check_against_reference([](Tensor a) { return a * 2.0; }, {keep[0]},
                          {.label = "dims -2 and 1", .function = &f});
}

TEST_CASE("jit errors: set_num_threads outside 1..kMaxThreads is a kiln::Error", "[jit][errors]") {
  CHECK_THROWS_WITH(kiln::set_num_threads(0), Contains("expected 1 <= n <= 1024, got 0"));
  CHECK_THROWS_AS(kiln::set_num_threads(-3), kiln::Error);
  CHECK_THROWS_WITH(kiln::set_num_threads(kiln::kMaxThreads + 1), Contains("got 1025"));
}

TEST_CASE("jit errors: a device kiln cannot compile for is a DeviceError, a malformed one an Error",
          "[jit][errors]") {
  Rng rng(9);
  std::vector<TestArray> keep;
  Array x = f32_array({4}, rng, keep);
  auto add_one = [](Tensor a) { return a + 1.0; };
  // No backend compiles for a GPU: the call is refused, on every machine, rather than run on the
  // CPU; the function is not left with a compiled variant (the next call is refused again).
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    kiln::Options o;
    o.device = device;
    kiln::Function f = kiln::jit(add_one, o);
    for (int call = 0; call < 2; ++call)
      expect_error<kiln::DeviceError>(f, {x}, {device, "no CUDA backend", "CPU only"});
    std::vector<Array> outs = {Array::empty({4}, DType::f32)};
    std::vector<Array> ins = {x};
    CHECK_THROWS_AS(f.call(ins, outs), kiln::DeviceError);
    CHECK_THROWS_AS(f.inspect(ins), kiln::DeviceError);
  }
  for (const char* device : {"gpu", "", "cuda:", "cuda:x", "CPU", "cuda:-1"}) {
    INFO("device \"" << device << "\"");
    kiln::Options o;
    o.device = device;
    try {
      (void)kiln::jit(add_one, o);
      FAIL("Options::device \"" << device << "\" was accepted");
    } catch (const kiln::Error& e) {
      CHECK_THAT(std::string(e.what()),
                 Contains("Options::device must be") && Contains("got \"" + std::string(device)));
    }
  }
}

TEST_CASE("jit errors: a group no backend of this build compiles is a CompileError naming it",
          "[jit][errors]") {
  Rng rng(10);
  std::vector<TestArray> keep;
  Array x = f32_array({4}, rng, keep);
  kiln::Function f = kiln::jit([](Tensor a) { return kiln::exp(a); });
#ifdef KILN_WITH_LLVM
  // The LLVM backend takes every group.
  check_against_reference([](Tensor a) { return kiln::exp(a); }, {keep[0]},
                          {.label = "exp", .function = &f});
#else
  expect_error<kiln::CompileError>(
      f, {x}, {"no backend in this build can compile an elementwise kernel", "without LLVM"});
  expect_error<kiln::CompileError>(kiln::jit([](Tensor a) { return kiln::sum(a, {0}); }), {x},
                                   {"no backend in this build can compile a", "without LLVM"});
#endif
}

TEST_CASE("jit errors: a traced function that returns nothing or an undefined Tensor",
          "[jit][errors]") {
  Rng rng(8);
  std::vector<TestArray> keep;
  Array x = f32_array({4}, rng, keep);
  expect_error<kiln::Error>(kiln::jit([](Tensor) { return std::vector<Tensor>{}; }), {x},
                            {"no tensors"});
  expect_error<kiln::Error>(kiln::jit([](Tensor) { return Tensor(); }), {x}, {"undefined"});
  expect_error<kiln::Error>(kiln::jit([](Tensor a) { return a + Tensor(); }), {x}, {"undefined"});
}

TEST_CASE("jit errors: f.call with wrong output arrays", "[jit][errors]" KILN_NEEDS_LLVM) {
  Rng rng(9);
  std::vector<TestArray> keep;
  auto fn = [](Tensor a) { return std::vector<Tensor>{a * 2.0, a.sum()}; };
  kiln::Function f = kiln::jit(fn);
  std::vector<Array> in = {f32_array({3, 5}, rng, keep)};
  std::vector<Array> good = {Array::empty({3, 5}, DType::f32), Array::empty({}, DType::f32)};

  std::vector<Array> bad_shape = {Array::empty({5, 3}, DType::f32), Array::empty({}, DType::f32)};
  try {
    f.call(in, bad_shape);
    FAIL("no ShapeError for a wrong output shape");
  } catch (const kiln::ShapeError& e) {
    CHECK_THAT(std::string(e.what()),
               Contains("[3,5]") && Contains("[5,3]") && Contains("output 0"));
  }
  std::vector<Array> bad_dtype = {Array::empty({3, 5}, DType::f32), Array::empty({}, DType::f64)};
  try {
    f.call(in, bad_dtype);
    FAIL("no DTypeError for a wrong output dtype");
  } catch (const kiln::DTypeError& e) {
    CHECK_THAT(std::string(e.what()),
               Contains("output 1") && Contains("float32") && Contains("float64"));
  }
  std::vector<Array> too_few = {Array::empty({3, 5}, DType::f32)};
  CHECK_THROWS_AS(f.call(in, too_few), kiln::Error);
  // A strided output is rejected (outputs must be contiguous).
  std::vector<float> buf(3 * 10 + 8);
  std::vector<Array> strided = {Array::view(buf.data(), {3, 5}, DType::f32, {10, 2}),
                                Array::empty({}, DType::f32)};
  CHECK_THROWS_AS(f.call(in, strided), kiln::ShapeError);
  // Bad Array::view arguments.
  CHECK_THROWS_AS(Array::view(buf.data(), {3, -1}, DType::f32), kiln::ShapeError);
  CHECK_THROWS_AS(Array::view(buf.data(), {3, 5}, DType::f32, {5}), kiln::ShapeError);
  CHECK_THROWS_AS(Array::view(nullptr, {3}, DType::f32), kiln::Error);
  // Still usable, and the results are right.
  f.call(in, good);
  kiln::ir::Graph g = trace_graph(fn, in);
  auto want = reference(g, in);
  assert_close(good[0], want[0]);
  assert_close(good[1], want[1], 15.0);
}

TEST_CASE("jit errors: the function stays usable after an error, and trace errors are not cached",
          "[jit][errors]" KILN_NEEDS_LLVM) {
  Rng rng(10);
  std::vector<TestArray> keep;
  std::atomic<int> traces{0};
  auto fn = [&traces](Tensor a, Tensor b) {
    ++traces;
    return kiln::exp(a) + b;
  };
  kiln::Function f = kiln::jit(fn);
  TestArray a = make_array(rng, {4, 6}, DType::f32);
  TestArray b_ok = make_array(rng, {6}, DType::f32);
  TestArray b_bad = make_array(rng, {5}, DType::f32);
  CHECK_THROWS_AS(f({a.array, b_bad.array}), kiln::ShapeError);
  CHECK(f.stats().compiles == 0);
  CHECK(f.stats().variants == 0);
  // A good call right after works.
  check_against_reference(fn, {a, b_ok}, {.label = "good call after an error", .function = &f});
  CHECK(f.stats().compiles == 1);
  // The bad shape throws again: it traces again (the error was not cached as a result).
  int before = traces.load();
  CHECK_THROWS_AS(f({a.array, b_bad.array}), kiln::ShapeError);
  CHECK(traces.load() > before);
  CHECK_THROWS_AS(f({a.array, b_bad.array}), kiln::ShapeError);
  // Good calls keep hitting the cached variant.
  int64_t compiles = f.stats().compiles;
  check_against_reference(fn, {a, b_ok}, {.label = "good call after two errors", .function = &f});
  CHECK(f.stats().compiles == compiles);
  CHECK(f.stats().variants == 1);
}

TEST_CASE("jit errors: an exception thrown by user code while tracing propagates unchanged",
          "[jit][errors]" KILN_NEEDS_LLVM) {
  Rng rng(11);
  std::vector<TestArray> keep;
  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  int calls = 0;
  kiln::Function f = kiln::jit([&calls](Tensor a) -> Tensor {
    if (calls++ == 0) throw Boom("user code failed");
    return a + 1.0;
  });
  Array x = f32_array({3}, rng, keep);
  CHECK_THROWS_AS(f({x}), Boom);
  // The next call traces again and succeeds.
  auto out = f({x});
  REQUIRE(out.size() == 1);
  CHECK(out[0].data<float>()[0] == Approx(keep[0].array.data<float>()[0] + 1.0f));
}
