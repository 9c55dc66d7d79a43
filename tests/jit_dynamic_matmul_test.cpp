// Symbolic variants of matmuls against the reference interpreter: symbolic M, K, N (float32 and
// float64), a symbolic batch with broadcast weights, a transposed operand, fused epilogues, and a
// transformer MLP block and attention with symbolic tokens (the model and DynCase:
// jit_dynamic_cases.h). Views, concatenation and conv2d: jit_dynamic_views_test.cpp.
#include "jit_dynamic_cases.h"
#include "needs_llvm.h"

namespace {
const std::vector<Pattern>& matmul_patterns() {
  static const std::vector<Pattern> v = {{Layout::contiguous},
                                         {Layout::strided, Layout::contiguous},
                                         {Layout::transposed, Layout::transposed},
                                         {Layout::offset, Layout::negative},
                                         {Layout::contiguous, Layout::transposed, Layout::strided},
                                         {Layout::zero_stride, Layout::negative}};
  return v;
}
}  // namespace

TEST_CASE("dynamic ops: matmul with symbolic M, K, N, all three, float32 and float64",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 700;
  auto body = [](Tensor x, Tensor w) { return kiln::matmul(x, w); };
  struct Dims {
    const char* name;
    std::map<int, std::vector<int>> per_arg;  // the dims that vary
    std::function<std::array<int64_t, 3>(int64_t)> mkn;
  };
  const std::vector<Dims> cases = {
      {"symbolic M",
       {{0, {0}}},
       [](int64_t s) {
         return std::array<int64_t, 3>{s, 24, 20};
       }},
      {"symbolic K",
       {{0, {1}}, {1, {0}}},
       [](int64_t s) {
         return std::array<int64_t, 3>{5, s, 20};
       }},
      {"symbolic N",
       {{1, {1}}},
       [](int64_t s) {
         return std::array<int64_t, 3>{5, 24, s};
       }},
  };
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64}) {
    for (const Dims& d : cases) {
      // symbolic mode (the fixed dims are symbols too) and per_arg (they stay concrete).
      for (bool per_arg : {false, true}) {
        const std::string name = std::string(d.name) + " " + dt(t) + (per_arg ? " per_arg" : "");
        auto c = dyn_case(name, body, per_arg ? per_arg_mode(d.per_arg) : symbolic_mode());
        for (size_t pi = 0; pi < 2; ++pi) {
          const auto& all = matmul_patterns();
          const Pattern& p = all[pi == 0 ? 0 : 1 + k++ % (all.size() - 1)];
          for (int64_t s : kSizes10) {
            auto [m, kk, n] = d.mkn(s);
            Rng rng(++seed);
            c.run({make_array(rng, {m, kk}, t, lay(p, 0)), make_array(rng, {kk, n}, t, lay(p, 1))},
                  dbl(kk), s_is(s) + " " + layouts_str(p));
          }
        }
        c.expect_symbolic();
      }
    }
    // All three symbolic, never equal to each other in one call (equal extents share a symbol,
    // which is a different variant).
    auto c = dyn_case("symbolic M, K, N " + dt(t), body, symbolic_mode());
    const std::vector<std::array<int64_t, 3>> mkns = {
        {16, 32, 48}, {48, 16, 32}, {2, 3, 5}, {3, 17, 2}, {17, 33, 3}, {33, 2, 17},
        {1, 5, 7},    {5, 1, 7},    {7, 5, 1}, {0, 5, 3},  {4, 0, 3},   {3, 4, 0}};
    for (size_t pi = 0; pi < 3; ++pi) {
      const Pattern& p = matmul_patterns()[pi];
      for (auto [m, kk, n] : mkns) {
        Rng rng(++seed);
        c.run({make_array(rng, {m, kk}, t, lay(p, 0)), make_array(rng, {kk, n}, t, lay(p, 1))},
              dbl(kk),
              "m,k,n=" + std::to_string(m) + "," + std::to_string(kk) + "," + std::to_string(n) +
                  " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
    // Square operands: x [s, s] @ w [s, s] is one symbol (the variant relies on the equality),
    // then a non-square call needs a variant of its own.
    auto sq = dyn_case("square matmul " + dt(t), body, symbolic_mode());
    for (int64_t s : kSizes) {
      Rng rng(++seed);
      sq.run({make_array(rng, {s, s}, t), make_array(rng, {s, s}, t, Layout::transposed)}, dbl(s),
             s_is(s) + " [s,s]@[s,s]");
    }
    for (int64_t s : {5, 17}) {
      Rng rng(++seed);
      sq.run({make_array(rng, {s, s + 1}, t), make_array(rng, {s + 1, s}, t, Layout::transposed)},
             dbl(s + 1), s_is(s) + " [s,s+1]@[s+1,s]");
    }
    sq.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: batched matmul with a symbolic batch, broadcast weights",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 800;
  for (DType t : {DType::f32, DType::f64}) {
    auto batched = [](Tensor x, Tensor w) { return kiln::matmul(x, w); };
    auto c = dyn_case("batched matmul " + dt(t), batched, symbolic_mode());
    auto bcast = [](Tensor x, Tensor w, Tensor v) {
      return std::vector<Tensor>{kiln::matmul(x, w), kiln::matmul(x, v)};
    };
    auto cb = dyn_case("batched matmul, broadcast weight " + dt(t), bcast, symbolic_mode());
    for (const Pattern& p :
         {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::transposed},
          Pattern{Layout::transposed, Layout::offset}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 4, 6}, t, lay(p, 0)), make_array(rng, {s, 6, 5}, t, lay(p, 1))},
              6, s_is(s) + " [s,4,6]@[s,6,5] " + layouts_str(p));
        cb.run({make_array(rng, {s, 4, 6}, t, lay(p, 0)), make_array(rng, {6, 5}, t, lay(p, 1)),
                make_array(rng, {6}, t, lay(p, 1))},
               6, s_is(s) + " [s,4,6]@[6,5] and @[6] " + layouts_str(p));
      }
      for (int64_t s : kSizes) {  // the rows vary too: [5, s, 6] @ [5, 6, 7]
        Rng rng(++seed);
        c.run({make_array(rng, {5, s, 6}, t, lay(p, 0)), make_array(rng, {5, 6, 7}, t, lay(p, 1))},
              6, s_is(s) + " [5,s,6]@[5,6,7] " + layouts_str(p));
      }
    }
    c.expect_symbolic();
    cb.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: matmul of a transposed operand (x.T @ w)",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 900;
  for (DType t : {DType::f32, DType::f64}) {
    auto body = [](Tensor x, Tensor w) {
      return std::vector<Tensor>{kiln::matmul(x.T(), w), kiln::matmul(w.T(), x)};
    };
    // x [12, s]: x.T is [s, 12]; w [12, 10]; w.T @ x is [10, s].
    auto c = dyn_case("x.T @ w " + dt(t), body, symbolic_mode());
    auto cp = dyn_case("x.T @ w " + dt(t) + " per_arg", body, per_arg_mode({{0, {1}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed},
                             Pattern{Layout::transposed, Layout::contiguous},
                             Pattern{Layout::strided, Layout::negative}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        std::vector<TestArray> in = {make_array(rng, {12, s}, t, lay(p, 0)),
                                     make_array(rng, {12, 10}, t, lay(p, 1))};
        c.run(in, 12, s_is(s) + " " + layouts_str(p));
        cp.run(in, 12, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
    cp.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: matmul + bias + gelu/relu/silu epilogues",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1000;
  struct Epi {
    const char* name;
    std::function<Tensor(Tensor)> fn;
  };
  const std::vector<Epi> epis = {{"gelu", [](Tensor y) { return kiln::gelu(y); }},
                                 {"gelu_tanh", [](Tensor y) { return kiln::gelu(y, true); }},
                                 {"relu", [](Tensor y) { return kiln::relu(y); }},
                                 {"silu", [](Tensor y) { return kiln::silu(y); }}};
  size_t k = 0;
  for (DType t : {DType::f32, DType::f64}) {
    for (const Epi& e : epis) {
      auto fn = e.fn;
      auto body = [fn](Tensor x, Tensor w, Tensor b) { return fn(kiln::matmul(x, w) + b); };
      const std::string name = std::string("matmul + bias + ") + e.name + " " + dt(t);
      auto c = dyn_case(name, body, symbolic_mode());
      auto cp = dyn_case(name + " per_arg", body, per_arg_mode({{0, {0}}}));
      for (size_t pi = 0; pi < 2; ++pi) {
        const auto& all = matmul_patterns();
        const Pattern& p = all[pi == 0 ? 0 : 1 + k++ % (all.size() - 1)];
        for (int64_t s : kSizes10) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {s, 24}, t, lay(p, 0)),
                                       make_array(rng, {24, 40}, t, lay(p, 1)),
                                       make_array(rng, {40}, t, lay(p, 2))};
          c.run(in, 24, s_is(s) + " " + layouts_str(p));
          cp.run(in, 24, s_is(s) + " " + layouts_str(p));
        }
      }
      c.expect_symbolic();
      cp.expect_symbolic();
    }
  }
}

TEST_CASE("dynamic ops: a transformer MLP block with symbolic tokens and hidden size",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1100;
  auto body = [](Tensor x, Tensor w1, Tensor b1, Tensor w2) {
    Tensor h = kiln::gelu(kiln::matmul(kiln::layer_norm(x), w1) + b1);
    return x + kiln::matmul(h, w2);
  };
  auto c = dyn_case("mlp block", body, symbolic_mode());
  for (int64_t d : {32, 24}) {
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, d}, DType::f32), make_array(rng, {d, 40}, DType::f32),
             make_array(rng, {40}, DType::f32), make_array(rng, {40, d}, DType::f32)},
            40, s_is(s) + " d=" + std::to_string(d));
    }
  }
  c.expect_symbolic();
}

TEST_CASE("dynamic ops: attention with a symbolic sequence length (and batch)",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1150;
  // scores [s, s]: both dims one symbol; softmax over it; then back to [s, 16].
  auto body = [](Tensor q, Tensor k, Tensor v) {
    return kiln::matmul(kiln::softmax(kiln::matmul(q, k.T()) * 0.25f), v);
  };
  for (DType t : {DType::f32, DType::f64}) {
    auto c = dyn_case("attention " + dt(t), body, symbolic_mode());
    for (const Pattern& p :
         {Pattern{Layout::contiguous}, Pattern{Layout::transposed, Layout::strided}}) {
      for (int64_t s : kSizes1) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 12}, t, lay(p, 0)), make_array(rng, {s, 12}, t, lay(p, 1)),
               make_array(rng, {s, 12}, t, lay(p, 2))},
              dbl(s) + 12, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
  // Batched, with the batch and the sequence both symbolic: q, k, v [b, s, 8].
  auto bbody = [](Tensor q, Tensor k, Tensor v) {
    Tensor scores = kiln::matmul(q, kiln::transpose(k, {0, 2, 1}));
    return kiln::matmul(kiln::softmax(scores, -1), v);
  };
  auto c = dyn_case("batched attention", bbody, symbolic_mode());
  for (auto [b, s] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 16}, {2, 48}, {3, 17}, {5, 2}, {2, 33}, {4, 3}, {1, 7}, {3, 1}}) {
    Rng rng(++seed);
    c.run({make_array(rng, {b, s, 8}, DType::f32), make_array(rng, {b, s, 8}, DType::f32),
           make_array(rng, {b, s, 8}, DType::f32, Layout::strided)},
          dbl(s) + 8, "b=" + std::to_string(b) + " " + s_is(s));
  }
  c.expect_symbolic();
}
