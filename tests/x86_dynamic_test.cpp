// Symbolic variants of float32 matmuls on the x86 backend: a run-time M (and N, K) keeps the
// register-blocked kernels, the fused epilogue and the prepacked constant weights.
#include "jit_test_util.h"

#include <kiln/kiln.h>

using namespace jt;
using kiln::DynamicMode;
using kiln::Function;
using kiln::Options;
using kiln::Tensor;

namespace {

Options symbolic() {
  Options o;
  o.dynamic = DynamicMode::symbolic;
  return o;
}

}  // namespace

TEST_CASE("symbolic matmuls run on the x86 backend", "[jit][dynamic][x86]") {
  Rng rng(9);
  auto body = [](Tensor x, Tensor w, Tensor b) { return kiln::relu(kiln::matmul(x, w) + b); };
  Function f = kiln::jit(body, symbolic());
  for (int64_t m : {3, 17, 40, 100}) {
    auto x = make_array(rng, {m, 20}, DType::f32);
    auto w = make_array(rng, {20, 36}, DType::f32);
    auto b = make_array(rng, {36}, DType::f32);
    CheckOptions opt;
    opt.function = &f;
    opt.tol_scale = 20;
    opt.label = "m=" + std::to_string(m);
    CHECK(check_against_reference(body, {x, w, b}, opt));
  }
  auto st = f.stats();
  CHECK(st.compiles == 1);
  CHECK(st.backend_kernels["x86"] == 1);
}
