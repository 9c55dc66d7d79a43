// Symbolic variants of float32 matmuls on the x86 backend: a run-time M (and N, K) keeps the
// register-blocked kernels and the fused epilogue; a constant weight is still packed once.
#include "jit_dynamic_cases.h"

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
