// Symbolic variants of float32 matmuls on the x86 backend: a run-time M (and N, K) keeps the
// register-blocked kernels and the fused epilogue; a constant weight is still packed once.
#include "jit_dynamic_cases.h"

namespace {

// f compiled `x86_kernels` x86 kernels over its variants (or, at 0, some), no LLVM kernel, and no
// fallback.
void check_x86_only(const Function& f, int64_t x86_kernels = 0) {
  auto st = f.stats();
  if (x86_kernels > 0)
    CHECK(st.backend_kernels["x86"] == x86_kernels);
  else
    CHECK(st.backend_kernels["x86"] >= 1);
  CHECK(st.backend_kernels.count("llvm") == 0);
  CHECK(st.fallbacks == 0);
}

}  // namespace

TEST_CASE("symbolic matmuls run on the x86 backend", "[jit][dynamic][x86]") {
  Rng rng(9);
  auto body = [](Tensor x, Tensor w, Tensor b) { return kiln::relu(kiln::matmul(x, w) + b); };
  Function f = kiln::jit(body, symbolic_mode());
  check_extents(body, f, {3, 17, 40, 100}, 20, [&](int64_t m) {
    return std::vector<TestArray>{make_array(rng, {m, 20}, DType::f32),
                                  make_array(rng, {20, 36}, DType::f32),
                                  make_array(rng, {36}, DType::f32)};
  });
  auto st = f.stats();
  CHECK(st.compiles == 1);
  CHECK(st.backend_kernels["x86"] == 1);
}

TEST_CASE("a symbolic M with a constant weight packed at compile time", "[jit][dynamic][x86]") {
  Rng rng(10);
  std::vector<float> w(24 * 40);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37 % 17) - 8) / 16.0f;
  auto body = [&w](Tensor x) {
    Tensor wc = kiln::constant(w.data(), {24, 40}, DType::f32);
    return kiln::gelu(kiln::matmul(x, wc));
  };
  Options o;
  o.dynamic = DynamicMode::per_arg;
  o.dynamic_dims[0] = {0};
  Function f = kiln::jit(body, o);
  check_extents(body, f, {2, 5, 33, 70}, 24, [&](int64_t m) {
    return std::vector<TestArray>{make_array(rng, {m, 24}, DType::f32)};
  });
  auto st = f.stats();
  CHECK(st.compiles == 1);
  CHECK(st.backend_kernels["x86"] == 1);
  CHECK(st.fallbacks == 0);
}

TEST_CASE("a mask broadcast over batch dims is the batched matmul's fused residual", "[jit][x86]") {
  // Attention scores: q @ k^T * scale + mask, the mask over all batches and heads ([M, N]), per
  // batch ([B, 1, M, N]) or per head ([H, M, N]): one x86 kernel, no epilogue split off.
  Rng rng(11);
  auto body = [](Tensor q, Tensor k, Tensor mask) {
    return kiln::matmul(q, k.transpose({0, 1, 3, 2})) * 0.125 + mask;
  };
  const int64_t B = 2, H = 3, M = 5, N = 7, D = 8;
  for (const std::vector<int64_t>& mask_shape :
       std::vector<std::vector<int64_t>>{{M, N}, {B, 1, M, N}, {H, M, N}, {B, H, M, N}}) {
    INFO("mask of rank " << mask_shape.size() << ", dim 0 " << mask_shape[0]);
    std::vector<TestArray> in = {make_array(rng, {B, H, M, D}, DType::f32),
                                 make_array(rng, {B, H, N, D}, DType::f32),
                                 make_array(rng, mask_shape, DType::f32)};
    Function f = kiln::jit(body);
    CHECK(check_against_reference(body, in, {.tol_scale = 8, .label = "mask", .function = &f}));
    check_x86_only(f, 1);
  }
  // A causal mask's leading block (mask[:M, :N] of a longer one): rows 12 apart, not N.
  auto body3 = [](Tensor q, Tensor k, Tensor mask) {
    using kiln::Index;
    return kiln::matmul(q, k.transpose({0, 1, 3, 2})) +
           mask.index({Index::slice(0, 5), Index::slice(0, 7)});
  };
  {
    std::vector<TestArray> in = {make_array(rng, {B, H, M, D}, DType::f32),
                                 make_array(rng, {B, H, N, D}, DType::f32),
                                 make_array(rng, {10, 12}, DType::f32)};
    Function f = kiln::jit(body3);
    CHECK(check_against_reference(body3, in, {.tol_scale = 8, .label = "slice", .function = &f}));
    CHECK(f.stats().backend_kernels["x86"] == 1);
    CHECK(f.stats().fallbacks == 0);
  }
  // Symbolic batch and rows, the mask [M, N] broadcast over the batch.
  auto body2 = [](Tensor q, Tensor k, Tensor mask) {
    return kiln::matmul(q, k.transpose({0, 2, 1})) + mask;
  };
  Function f = kiln::jit(body2, symbolic_mode());
  for (int64_t b : {1, 4, 3}) {
    for (int64_t m : {1, 6, 17}) {
      INFO("batch " << b << ", rows " << m);
      std::vector<TestArray> in = {make_array(rng, {b, m, D}, DType::f32),
                                   make_array(rng, {b, 9, D}, DType::f32),
                                   make_array(rng, {m, 9}, DType::f32)};
      CHECK(check_against_reference(body2, in, {.tol_scale = 8, .label = "mask", .function = &f}));
    }
  }
  check_x86_only(f);
}

TEST_CASE("a scalar bias term with symbolic N is made per call, with exact N once at compile time",
          "[jit][x86]") {
  Rng rng(12);
  auto body = [](Tensor x, Tensor w) { return kiln::relu(kiln::matmul(x, w) * 2.0 - 1.5) / 4.0; };
  Function f = kiln::jit(body, symbolic_mode());
  check_extents(body, f, {3, 17, 40}, 20, [&](int64_t n) {
    return std::vector<TestArray>{make_array(rng, {n, 20}, DType::f32),
                                  make_array(rng, {20, n + 5}, DType::f32)};
  });
  Function g = kiln::jit(body);
  check_extents(body, g, {9}, 20, [&](int64_t n) {
    return std::vector<TestArray>{make_array(rng, {n, 20}, DType::f32),
                                  make_array(rng, {20, 33}, DType::f32)};
  });
  for (const Function* h : {&f, &g}) check_x86_only(*h);
}

TEST_CASE("a constant bias vector subtracted or scaled is made once, at compile time",
          "[jit][x86]") {
  // x @ w - c and (x @ w + c) / 2 with c a constant: the kernel's bias, -c or c / 2, is made when
  // the kernel is compiled; calls with other x (and more rows) read it.
  Rng rng(13);
  const TestArray c = make_array(rng, {21}, DType::f32);
  const std::vector<float> cv(c.array.data<float>(), c.array.data<float>() + 21);
  auto sub = [&cv](Tensor x, Tensor w) {
    return kiln::matmul(x, w) - kiln::constant(cv.data(), {21}, kiln::f32);
  };
  auto half = [&cv](Tensor x, Tensor w) {
    return (kiln::matmul(x, w) + kiln::constant(cv.data(), {21}, kiln::f32)) / 2.0;
  };
  for (auto body : {std::function<Tensor(Tensor, Tensor)>(sub), std::function(half)}) {
    Options o;  // x's rows symbolic (w's columns are the constant's)
    o.dynamic = DynamicMode::per_arg;
    o.dynamic_dims = {{0, {0}}};
    Function f = kiln::jit(body, o);
    check_extents(body, f, {1, 5, 40}, 20, [&](int64_t n) {
      return std::vector<TestArray>{make_array(rng, {n, 20}, DType::f32),
                                    make_array(rng, {20, 21}, DType::f32)};
    });
    check_x86_only(f);
  }
}

TEST_CASE("a gate and a GEMV written with a vector stay fused with symbolic extents",
          "[jit][dynamic][x86]") {
  // silu(x @ w1) * (x @ w3) (x strided: its strides at run time) and W @ v + b, every dim
  // symbolic: two compiles (an extent of 1 is a variant of its own), x86 kernels only, no
  // fallback, at every extent.
  Rng rng(14);
  auto gate = [](Tensor x, Tensor w1, Tensor w3) {
    return kiln::silu(kiln::matmul(x, w1)) * kiln::matmul(x, w3);
  };
  Function f = kiln::jit(gate, symbolic_mode());
  check_extents(gate, f, {1, 6, 33}, 40, [&](int64_t m) {
    return std::vector<TestArray>{make_array(rng, {m, 20}, DType::f32, Layout::strided),
                                  make_array(rng, {20, 36}, DType::f32),
                                  make_array(rng, {20, 36}, DType::f32)};
  });
  auto gemv = [](Tensor w, Tensor v, Tensor b) { return kiln::matmul(w, v) + b; };
  Function g = kiln::jit(gemv, symbolic_mode());
  check_extents(gemv, g, {1, 7, 40}, 24, [&](int64_t m) {
    return std::vector<TestArray>{make_array(rng, {m, 24}, DType::f32),
                                  make_array(rng, {24}, DType::f32),
                                  make_array(rng, {m}, DType::f32)};
  });
  CHECK(f.stats().compiles == 2);
  CHECK(g.stats().compiles == 2);
  check_x86_only(f, 4);
  check_x86_only(g, 2);
}
