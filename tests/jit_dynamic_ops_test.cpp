// Symbolic variants op by op, against the reference interpreter. Each case makes one Function with
// dynamic=symbolic (or per_arg where a dim must stay concrete: a concrete reduction or matmul
// dim, conv2d's channels and spatial dims, reshapes and concatenations along the other dims),
// calls it on a sequence of extents for the dynamic dims (multiples of 16 first, so both the
// "%16" and the general variant are compiled; then 1 and 0, which take exact variants) in several
// layouts, and checks every result; every other call writes into caller-owned outputs (f.call).
// A small model of the shape policy (ShapePolicy + VariantGuard, rewritten here from their
// documented rules) says how many variants those calls need; the Function must compile exactly
// that many, with no dim "kept exact": the symbolic variants served the calls. The last cases are
// the ops that cannot take some symbolic extent: those dims are kept exact (reported once), the
// others stay symbolic, and the results are right.
#include "jit_dynamic_cases.h"
#include "needs_llvm.h"

// ------------------------------------------------------------------------------------------------
// Elementwise

TEST_CASE("dynamic ops: unary chains over every dtype", "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 100;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    auto body = [t](Tensor x) {
      if (t == DType::boolean)  // the unary ops that take bool
        return std::vector<Tensor>{kiln::exp(x) + kiln::abs(x), kiln::sigmoid(x) * kiln::tanh(x),
                                   kiln::square(x), kiln::gelu(x) - kiln::silu(x),
                                   kiln::erf(x) + kiln::gelu(x, true)};
      return std::vector<Tensor>{
          kiln::exp(kiln::tanh(x)) * 0.5 + kiln::sigmoid(x),
          kiln::gelu(x) - kiln::silu(x) * kiln::erf(x),
          kiln::sqrt(kiln::abs(x) + 1.0) * kiln::rsqrt(kiln::square(x) + 1.0),
          kiln::log(kiln::abs(x) + 1.0) - kiln::relu(-x) + kiln::neg(x).abs(),
          kiln::gelu(x, true) * 2.0};
    };
    auto c = dyn_case("unary chain " + dt(t), body, symbolic_mode());
    for (const Pattern& p : rotate3(unary_patterns(), k++)) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 7}, t, lay(p, 0))}, 1, s_is(s) + " x[s,7] " + layouts_str(p));
      }
      for (int64_t s : kSizes) {
        Rng rng(++seed);
        c.run({make_array(rng, {5, s}, t, lay(p, 0), Values::wide)}, 1,
              s_is(s) + " x[5,s] " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: binary, where, compare and cast chains over every dtype, [n] bias",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 200;
  size_t k = 0;
  const std::vector<Pattern> patterns = {
      {Layout::contiguous},
      {Layout::strided, Layout::contiguous, Layout::negative, Layout::contiguous},
      {Layout::transposed, Layout::offset, Layout::strided, Layout::contiguous},
      {Layout::negative, Layout::zero_stride, Layout::offset, Layout::contiguous},
      {Layout::offset, Layout::transposed, Layout::contiguous, Layout::contiguous}};
  for (DType t : all_dtypes()) {
    // x, y: [m, n]; b: [n]; c: a 0-d tensor.
    // x, y: [m, n]; b: [n]; c: a 0-d tensor. Each output is one fused chain (one kernel), so a
    // few outputs cover many ops without a compile per op.
    auto body = [t](Tensor x, Tensor y, Tensor b, Tensor c) {
      std::vector<Tensor> out;
      auto i32 = [](Tensor v) { return v.astype(DType::i32); };
      // The comparisons, bit-packed.
      out.push_back(i32(x < b) + i32(x == y) * 2.0 + i32(x != b) * 4.0 + i32(x >= c) * 8.0 +
                    i32(y <= b) * 16.0 + i32(x > y) * 32.0);
      if (t == DType::boolean) {  // the ops that take bool
        out.push_back((x + b) * y);
        out.push_back(kiln::maximum(x, b) + kiln::minimum(x, y) * c);
        out.push_back(kiln::where(x, y, b));
        out.push_back(
            kiln::where(x != b, kiln::scalar(1.5, DType::f32), kiln::scalar(-2, DType::f32)) +
            (x + 1.0));
      } else {
        out.push_back((x + b * c) * 2.0 - (x * y - b) + 1.0);
        out.push_back(x / y);
        out.push_back(kiln::maximum(x, b) + kiln::minimum(x, y) + kiln::where(x > y, x, b) +
                      kiln::where(x < 0.5, x * 2.0 + 1.0, 3.0 - x));
        if (kiln::is_floating(t)) out.push_back(kiln::pow(y, x) - kiln::pow(x, 2.0) * c);
      }
      // Casts to every dtype, arithmetic in the target dtype, then weighted into one output per
      // kind (integers exactly, in int64; float32 and float64 in float64). float16 and bfloat16
      // arithmetic is done in float32 and rounded at the store, so those are outputs of their own.
      Tensor ints, floats;
      double w = 1;
      for (DType to : all_dtypes()) {
        Tensor v = x.astype(to) + b.astype(to);
        if (to == DType::f16 || to == DType::bf16) {
          out.push_back(v);
        } else if (kiln::is_floating(to)) {
          Tensor f = v.astype(DType::f64) * w;
          floats = floats.defined() ? floats + f : f;
        } else {
          Tensor iv = v.astype(DType::i64) * w;
          ints = ints.defined() ? ints + iv : iv;
        }
        w *= 3;
      }
      out.push_back(ints);
      out.push_back(floats);
      return out;
    };
    auto c = dyn_case("binary chain " + dt(t), body, symbolic_mode());
    for (size_t pi = 0; pi < 2; ++pi) {  // contiguous, then one of the others (rotating)
      const Pattern& p = patterns[pi == 0 ? 0 : 1 + k % (patterns.size() - 1)];
      for (int64_t s : kSizes10) {  // symbolic rows
        Rng rng(++seed);
        c.run({make_array(rng, {s, 7}, t, lay(p, 0)),
               make_array(rng, {s, 7}, t, lay(p, 1), Values::positive),
               make_array(rng, {7}, t, lay(p, 2)), make_array(rng, {}, t, lay(p, 3))},
              1, s_is(s) + " m=s n=7 " + layouts_str(p));
      }
      for (int64_t s : kSizes1) {  // symbolic columns: the bias's extent is the symbol
        Rng rng(++seed);
        c.run({make_array(rng, {5, s}, t, lay(p, 0)),
               make_array(rng, {5, s}, t, lay(p, 1), Values::positive),
               make_array(rng, {s}, t, lay(p, 2)), make_array(rng, {}, t, lay(p, 3))},
              1, s_is(s) + " m=5 n=s " + layouts_str(p));
      }
    }
    ++k;
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: broadcasting [n] and [m, 1] against [m, n], mixed dtypes",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 300;
  auto body = [](Tensor x, Tensor col, Tensor row, Tensor i) {
    return std::vector<Tensor>{x * col + row, kiln::where(col > row, x, i), (x + i) * 0.25,
                               kiln::maximum(col, row)};
  };
  auto c = dyn_case("broadcast mixed", body, symbolic_mode());
  for (const Pattern& p : std::vector<Pattern>{
           {Layout::contiguous},
           {Layout::transposed, Layout::strided, Layout::negative, Layout::offset}}) {
    for (int64_t m : kSizes10) {
      for (int64_t n : {5, 16, 33}) {
        if (m == n) continue;
        Rng rng(++seed);
        c.run({make_array(rng, {m, n}, DType::f32, lay(p, 0)),
               make_array(rng, {m, 1}, DType::f16, lay(p, 1)),
               make_array(rng, {n}, DType::f64, lay(p, 2)),
               make_array(rng, {m, n}, DType::i32, lay(p, 3))},
              1, "m=" + std::to_string(m) + " n=" + std::to_string(n) + " " + layouts_str(p));
      }
    }
  }
  c.expect_symbolic();
}

// ------------------------------------------------------------------------------------------------
// Reductions and the row composites

TEST_CASE("dynamic ops: sum mean max min over symbolic and fixed axes, keepdims, negative axes",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 400;
  size_t k = 0;
  auto body = [](Tensor x, Tensor y) {  // x [s, 7], y [5, s, 3]
    return std::vector<Tensor>{x.sum(0), x.mean(-1, true), x.max(-2), kiln::min(x, 1, true),
                               x.sum(), y.sum(1), y.mean({0, 2}), y.max({-2, 0}, true), y.min(-1),
                               y.sum({1, 2}, true),
                               // Reduced over the symbolic axis, then broadcast back against it.
                               x - x.mean(0, true), y * y.sum(1, true)};
  };
  // Sums and means only: these take extent 0 too.
  auto body0 = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{x.sum(0), x.mean(1, true), x.sum(), y.sum(1), y.mean({-2, 0})};
  };
  const std::vector<Pattern> patterns = {{Layout::contiguous},
                                         {Layout::strided, Layout::transposed},
                                         {Layout::transposed, Layout::negative},
                                         {Layout::negative, Layout::offset},
                                         {Layout::offset, Layout::strided}};
  for (DType t : all_dtypes()) {
    // symbolic: every dim is a symbol (the fixed ones too); per_arg: only s is, 7, 5, 3 stay
    // concrete (a concrete reduction axis of a tensor with a symbolic dim).
    for (bool per_arg : {false, true}) {
      Options o = per_arg ? per_arg_mode({{0, {0}}, {1, {1}}}) : symbolic_mode();
      const std::string mode = per_arg ? " per_arg" : " symbolic";
      auto c = dyn_case("reductions " + dt(t) + mode, body, o);
      auto c0 = dyn_case("sum/mean with extent 0 " + dt(t) + mode, body0, o);
      // (per_arg: one layout pattern, rotating: the compiles are the budget.)
      for (size_t pi = per_arg ? 1 : 0; pi < 2; ++pi) {
        const Pattern& p = patterns[pi == 0 ? 0 : 1 + k++ % (patterns.size() - 1)];
        for (int64_t s : kSizes1) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {s, 7}, t, lay(p, 0)),
                                       make_array(rng, {5, s, 3}, t, lay(p, 1))};
          c.run(in, dbl(15 * s), s_is(s) + " " + layouts_str(p));
        }
        for (int64_t s : {0, 2, 17, 1, 32}) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {s, 7}, t, lay(p, 0)),
                                       make_array(rng, {5, s, 3}, t, lay(p, 1))};
          c0.run(in, dbl(15 * s), s_is(s) + " " + layouts_str(p));
        }
      }
      c.expect_symbolic();
      c0.expect_symbolic();
    }
  }
}

TEST_CASE("dynamic ops: softmax, log_softmax, layer_norm, rms_norm over symbolic and fixed rows",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 500;
  size_t k = 0;
  struct Op {
    const char* name;
    std::function<Tensor(Tensor, Tensor, Tensor, int)> fn;
  };
  const std::vector<Op> ops = {
      {"softmax", [](Tensor x, Tensor, Tensor, int ax) { return kiln::softmax(x, ax); }},
      {"log_softmax", [](Tensor x, Tensor, Tensor, int ax) { return kiln::log_softmax(x, ax); }},
      {"layer_norm",
       [](Tensor x, Tensor w, Tensor b, int ax) { return kiln::layer_norm(x, w, b, ax); }},
      {"layer_norm no params", [](Tensor x, Tensor, Tensor,
                                  int ax) { return kiln::layer_norm(x, Tensor(), Tensor(), ax); }},
      {"rms_norm", [](Tensor x, Tensor w, Tensor, int ax) { return kiln::rms_norm(x, w, ax); }},
      {"rms_norm no weight",
       [](Tensor x, Tensor, Tensor, int ax) { return kiln::rms_norm(x, Tensor(), ax); }},
  };
  const std::vector<Pattern> patterns = {{Layout::contiguous},
                                         {Layout::strided, Layout::contiguous, Layout::negative},
                                         {Layout::transposed, Layout::strided},
                                         {Layout::offset, Layout::negative, Layout::contiguous},
                                         {Layout::negative, Layout::offset}};
  for (DType t : float_dtypes()) {
    for (const Op& op : ops) {
      auto fn = op.fn;
      // Over the last axis (spelled -1 and 1), x [r, n] with w, b [n].
      auto last = [fn](Tensor x, Tensor w, Tensor b) {
        return std::vector<Tensor>{fn(x, w, b, -1)};
      };
      auto last1 = [fn](Tensor x, Tensor w, Tensor b) {
        return std::vector<Tensor>{fn(x, w, b, 1)};
      };
      const std::string name = std::string(op.name) + " " + dt(t);
      // 1. symbolic mode, the normalized (last) dim varies; the 5 rows are a symbol too.
      auto c1 = dyn_case(name + " over a symbolic last dim", last, symbolic_mode());
      // 2. per_arg, the rows vary and the last dim (24) stays concrete.
      auto c2 = dyn_case(name + " over a concrete last dim, symbolic rows", last1,
                         per_arg_mode({{0, {0}}}));
      // 3. symbolic mode, the rows vary (24 is a symbol of fixed extent); float32 and float16.
      const bool rows3 = t == DType::f32 || t == DType::f16;
      auto c3 = dyn_case(name + " symbolic rows", last, symbolic_mode());
      for (size_t pi = 0; pi < 2; ++pi) {
        const Pattern& p = patterns[pi == 0 ? 0 : 1 + k++ % (patterns.size() - 1)];
        for (int64_t n : kSizes1) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {5, n}, t, lay(p, 0), Values::wide),
                                       make_array(rng, {n}, t, lay(p, 1)),
                                       make_array(rng, {n}, t, lay(p, 2))};
          c1.run(in, std::max(4.0, std::sqrt(dbl(n))), "x[5,s] " + s_is(n) + " " + layouts_str(p));
        }
        for (int64_t r : kSizes10) {
          Rng rng(++seed);
          std::vector<TestArray> in = {make_array(rng, {r, 24}, t, lay(p, 0), Values::wide),
                                       make_array(rng, {24}, t, lay(p, 1)),
                                       make_array(rng, {24}, t, lay(p, 2))};
          c2.run(in, std::max(4.0, std::sqrt(24.0)), "x[s,24] " + s_is(r) + " " + layouts_str(p));
          if (rows3)
            c3.run(in, std::max(4.0, std::sqrt(24.0)), "x[s,24] " + s_is(r) + " " + layouts_str(p));
        }
      }
      c1.expect_symbolic();
      c2.expect_symbolic();
      if (rows3) c3.expect_symbolic();
    }
  }
}

TEST_CASE("dynamic ops: softmax and log_softmax over a symbolic leading axis (axis 0)",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 600;
  for (DType t : {DType::f32, DType::f64}) {
    auto body = [](Tensor x) {
      return std::vector<Tensor>{kiln::softmax(x, 0), kiln::log_softmax(x, -2)};
    };
    auto c = dyn_case("softmax axis 0 " + dt(t), body, per_arg_mode({{0, {0}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed}}) {
      for (int64_t s : kSizes1) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 9}, t, lay(p, 0), Values::wide)},
              std::max(2.0, std::sqrt(dbl(s))), s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

// ------------------------------------------------------------------------------------------------
// matmul
