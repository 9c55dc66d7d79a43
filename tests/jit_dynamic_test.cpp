// Dynamic shapes through the JIT: the shape policy (auto, exact, symbolic, per-argument), the
// guards of symbolic variants (0 and 1, divisibility, equal-dims relations), the variant bound,
// the fallback to exact dims (op-by-op cases: jit_dynamic_ops_test.cpp, _views_test.cpp).
#include "jit_dynamic_cases.h"
#include "needs_llvm.h"

namespace {

Options dynamic(DynamicMode m, int max_variants = 8) {
  Options o;
  o.dynamic = m;
  o.max_variants = max_variants;
  return o;
}

// A transformer-style block: layer_norm, Linear + GELU, Linear, residual.
Tensor mlp_block(Tensor x, Tensor w1, Tensor b1, Tensor w2) {
  Tensor h = kiln::gelu(kiln::matmul(kiln::layer_norm(x), w1) + b1);
  return x + kiln::matmul(h, w2);
}

}  // namespace

TEST_CASE("300 leading dims compile at most 3 times, each result right",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(7);
  auto w1 = make_array(rng, {32, 48}, DType::f32);
  auto b1 = make_array(rng, {48}, DType::f32);
  auto w2 = make_array(rng, {48, 32}, DType::f32);
  Function f = kiln::jit(mlp_block);  // dynamic="auto" is the default
  std::vector<int64_t> lengths(300);
  std::iota(lengths.begin(), lengths.end(), int64_t{2});
  std::shuffle(lengths.begin(), lengths.end(), rng);
  lengths[17] = 1;  // a length of 1 takes its own variant
  int checked = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto x = make_array(rng, {lengths[i], 32}, DType::f32);
    CheckOptions opt;
    opt.function = &f;
    opt.tol_scale = 48;
    opt.label = "call " + std::to_string(i) + " T=" + std::to_string(lengths[i]);
    // Every call is checked for the first 40, then every 7th (the interpreter is slow).
    if (i < 40 || i % 7 == 0) {
      CHECK(check_against_reference(mlp_block, {x, w1, b1, w2}, opt));
      ++checked;
    } else {
      f({x.array, w1.array, b1.array, w2.array});
    }
  }
  auto st = f.stats();
  INFO("recompile reasons:" << joined(st.recompile_reasons));
  CHECK(st.compiles <= 3);
  CHECK(st.calls == 300);
  CHECK(st.variants == st.compiles);
  CHECK(any_contains(st.recompile_reasons, "dim 0"));
  CHECK(any_contains(st.recompile_reasons, "now symbolic"));
  CHECK(checked > 50);
}

TEST_CASE("dims seen with one value stay exact", "[jit][dynamic]") {
  Rng rng(1);
  auto body = [](Tensor x, Tensor w) { return kiln::relu(kiln::matmul(x, w)); };
  Function f = kiln::jit(body);
  auto w = make_array(rng, {16, 24}, DType::f32);
  check_extents(body, f, {5, 9, 30}, 16, [&](int64_t t) {
    return std::vector<TestArray>{make_array(rng, {t, 16}, DType::f32), w};
  });
  auto st = f.stats();
  CHECK(st.compiles == 2);
  // The variant of the second compile: only x's dim 0 is a symbol.
  INFO(joined(st.recompile_reasons));
  CHECK(any_contains(st.recompile_reasons, "arg 0 dim 0: 5 -> 9, now symbolic"));
  CHECK(any_contains(st.recompile_reasons, "float32[s0,16] float32[16,24]"));
}

TEST_CASE("a variant that assumes a multiple of 16 is not used for 17",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(2);
  auto body = [](Tensor x) { return kiln::softmax(x * 2.0f, -1); };
  Function f = kiln::jit(body, dynamic(DynamicMode::symbolic));
  auto run = [&](int64_t n) {
    auto x = make_array(rng, {3, n}, DType::f32);
    CheckOptions opt;
    opt.function = &f;
    opt.label = "n=" + std::to_string(n);
    CHECK(check_against_reference(body, {x}, opt));
  };
  run(32);
  CHECK(f.stats().compiles == 1);
  CHECK(any_contains(f.stats().recompile_reasons, "s1>=2%16"));
  run(48);  // also a multiple: served by the same variant
  CHECK(f.stats().compiles == 1);
  run(17);
  CHECK(f.stats().compiles == 2);
  run(33);  // the general variant
  run(64);  // both serve it: the more specialized one does
  CHECK(f.stats().compiles == 2);
}

TEST_CASE("extents 0 and 1 take their own variants", "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(3);
  // b broadcasts against x: with x's rows at 1, a symbolic row count would be wrong.
  auto body = [](Tensor x, Tensor b) { return (x + b).sum(0); };
  Function f = kiln::jit(body, dynamic(DynamicMode::symbolic));
  check_extents(body, f, {5, 7, 1, 0, 9, 1, 0}, 1, [&](int64_t rows) {
    return std::vector<TestArray>{make_array(rng, {rows, 6}, DType::f32),
                                  make_array(rng, {6}, DType::f32)};
  });
  // 5, 7, 9: one symbolic variant; 1 and 0: one each.
  CHECK(f.stats().compiles == 3);
}

TEST_CASE("equal-dims relations are guards, re-checked on each call",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(4);
  auto body = [](Tensor x, Tensor y) { return x.sum() + y.max(); };
  Function f = kiln::jit(body, dynamic(DynamicMode::symbolic));
  auto run = [&](int64_t a, int64_t b) {
    auto x = make_array(rng, {a}, DType::f32);
    auto y = make_array(rng, {b}, DType::f32);
    CheckOptions opt;
    opt.function = &f;
    opt.tol_scale = 8;
    opt.label = "a=" + std::to_string(a) + " b=" + std::to_string(b);
    CHECK(check_against_reference(body, {x, y}, opt));
  };
  run(8, 8);  // x and y share one symbol: the variant relies on them being equal
  CHECK(f.stats().compiles == 1);
  CHECK(any_contains(f.stats().recompile_reasons, "float32[s0] float32[s0]"));
  run(12, 12);
  CHECK(f.stats().compiles == 1);
  run(8, 9);  // no longer equal: the guard fails, a variant with two symbols is compiled
  CHECK(f.stats().compiles == 2);
  CHECK(any_contains(f.stats().recompile_reasons, "float32[s0] float32[s1]"));
  run(20, 3);
  CHECK(f.stats().compiles == 2);
}

TEST_CASE("dynamic=False compiles every shape, per-argument dims",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(5);
  auto body = [](Tensor x, Tensor y) { return x * 2.0f + y; };
  Function exact = kiln::jit(body, dynamic(DynamicMode::exact, 64));
  Options per = dynamic(DynamicMode::per_arg);
  per.dynamic_dims[0] = {-1};  // x's last dim
  per.dynamic_dims[1] = {1};
  Function partial = kiln::jit(body, per);
  for (int64_t n : {4, 6, 10, 12}) {
    auto x = make_array(rng, {3, n}, DType::f32);
    auto y = make_array(rng, {3, n}, DType::f32, Layout::strided);
    for (const Function* f : {&exact, &partial}) {
      CheckOptions opt;
      opt.function = f;
      CHECK(check_against_reference(body, {x, y}, opt));
    }
  }
  CHECK(exact.stats().compiles == 4);
  CHECK(partial.stats().compiles == 1);
  CHECK(any_contains(partial.stats().recompile_reasons, "float32[3,s0] float32[3,s0]:strided"));
}

TEST_CASE("the variant bound: counted, then the most general variant",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(6);
  auto body = [](Tensor x) { return kiln::exp(x) - 1.0f; };
  Function f = kiln::jit(body, dynamic(DynamicMode::exact, 3));
  check_extents(body, f, {2, 3, 4, 5, 6, 7, 8, 9}, 1, [&](int64_t n) {
    return std::vector<TestArray>{make_array(rng, {n, 4}, DType::f32)};
  });
  auto st = f.stats();
  INFO(joined(st.recompile_reasons));
  // 3 exact variants, then one most general variant that serves every later call.
  CHECK(st.compiles == 4);
  CHECK(st.variants == 4);
  CHECK(st.variant_limit_hits == 1);
  CHECK(any_contains(st.recompile_reasons, "variant bound reached"));
  // A call the general variant cannot serve (a dim of 1) still compiles, and is counted.
  auto x = make_array(rng, {1, 4}, DType::f32);
  CheckOptions opt;
  opt.function = &f;
  CHECK(check_against_reference(body, {x}, opt));
  CHECK(f.stats().variant_limit_hits == 2);
}

TEST_CASE("a program that cannot take a dim symbolic keeps it exact",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(8);
  // Slicing with a bound on the dynamic axis has no single-symbol extent.
  auto body = [](Tensor x) { return x.index({kiln::Index::slice(1, std::nullopt)}) * 3.0f; };
  Function f = kiln::jit(body);
  check_extents(body, f, {4, 5, 6}, 1, [&](int64_t n) {
    return std::vector<TestArray>{make_array(rng, {n, 3}, DType::f32)};
  });
  auto st = f.stats();
  INFO(joined(st.recompile_reasons));
  CHECK(st.compiles == 3);
  CHECK(any_contains(st.recompile_reasons, "kept exact"));
  // Pinning a dim is a fallback from the dynamic path: counted like a missed fast path.
  CHECK(st.fallbacks == 1);
  CHECK(any_contains(st.fallback_reasons, "arg 0 dim 0: kept exact"));
}

TEST_CASE("symbolic loop nests vectorize with run-time trip counts",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(10);
  auto body = [](Tensor x, Tensor y) { return kiln::tanh(x * 2.0f + y); };
  Function f = kiln::jit(body, dynamic(DynamicMode::symbolic));
  auto x = make_array(rng, {37, 53}, DType::f32);
  auto y = make_array(rng, {37, 53}, DType::f32);
  CheckOptions opt;
  opt.function = &f;
  CHECK(check_against_reference(body, {x, y}, opt));
  // inspect() compiles the variant that serves the call: the symbolic one.
  kiln::Inspection ins = f.inspect({x.array, y.array});
  REQUIRE(ins.kernels.size() == 1);
  const auto& k = ins.kernels[0];
  INFO(k.source.substr(0, 4000));
  CHECK(ins.graph.find("s0") != std::string::npos);
  // Packed single-precision vector arithmetic on ymm or zmm registers.
  bool vector = k.asm_text.find("ps\t%ymm") != std::string::npos ||
                k.asm_text.find("ps\t%zmm") != std::string::npos;
  CHECK(vector);
}

TEST_CASE("Tensor::shape() of a symbolic dim throws, so arithmetic on it keeps the dim exact",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(12);
  auto body = [](Tensor x) { return x.sum(0) * (1.0 / static_cast<double>(x.shape()[0])); };
  Function f = kiln::jit(body);  // automatic: exact first, then dim 0 would become symbolic
  check_extents(body, f, {4, 6, 9}, 4, [&](int64_t n) {
    return std::vector<TestArray>{make_array(rng, {n, 3}, DType::f32)};
  });
  auto st = f.stats();
  INFO(joined(st.recompile_reasons));
  CHECK(st.compiles == 3);
  CHECK(any_contains(st.recompile_reasons, "arg 0 dim 0: kept exact"));
  CHECK(any_contains(st.recompile_reasons, "is symbolic in this trace and has no extent"));
}

TEST_CASE("f.call into outputs checks them against the call's symbolic extents",
          "[jit][dynamic]" KILN_NEEDS_LLVM) {
  Rng rng(13);
  auto body = [](Tensor x) { return x * 2.0f; };
  Function f = kiln::jit(body, dynamic(DynamicMode::symbolic));
  auto x = make_array(rng, {7, 5}, DType::f32);
  std::vector<kiln::Array> good = {kiln::Array::empty({7, 5}, DType::f32)};
  f.call(std::vector<kiln::Array>{x.array}, good);
  std::vector<kiln::Array> bad = {kiln::Array::empty({6, 5}, DType::f32)};
  try {
    f.call(std::vector<kiln::Array>{x.array}, bad);
    FAIL("a [6,5] output for a [7,5] call was accepted");
  } catch (const kiln::ShapeError& e) {
    CHECK(std::string(e.what()).find("shape [7,5], got [6,5]") != std::string::npos);
  }
  CHECK(f.stats().compiles == 1);
}
