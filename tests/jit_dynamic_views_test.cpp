// Symbolic variants of views, concatenation and conv2d against the reference interpreter, large
// symbolic extents split across threads, and the ops that keep a dim exact (the model and
// DynCase: jit_dynamic_cases.h). Matmuls and attention: jit_dynamic_matmul_test.cpp.
#include "jit_dynamic_cases.h"
#include "needs_llvm.h"

TEST_CASE("dynamic ops: layer_norm and softmax over a symbolic axis that is not the last",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1170;
  auto body = [](Tensor x, Tensor w) {  // x [s, 6]; w [s]: normalized over axis 0
    return std::vector<Tensor>{kiln::layer_norm(x, Tensor(), Tensor(), 0),
                               kiln::rms_norm(x.T(), w, -1).T(), kiln::log_softmax(x, -2)};
  };
  for (DType t : {DType::f32, DType::f16}) {
    auto c = dyn_case("norms over axis 0 " + dt(t), body, symbolic_mode());
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed}}) {
      for (int64_t s : kSizes1) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 6}, t, lay(p, 0), Values::wide), make_array(rng, {s}, t)},
              std::max(4.0, std::sqrt(dbl(s))), s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

// ------------------------------------------------------------------------------------------------
// Views

TEST_CASE("dynamic ops: transpose and permute", "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1200;
  for (DType t : {DType::f32, DType::i64, DType::boolean, DType::f16}) {
    auto body = [](Tensor x) {
      return std::vector<Tensor>{x.transpose({2, 0, 1}), x.T() * x.T(),
                                 kiln::transpose(x, {1, 0, 2}).sum(-1), x.transpose({0, 2, 1})};
    };
    auto c = dyn_case("permute " + dt(t), body, symbolic_mode());
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::transposed},
                             Pattern{Layout::strided}, Pattern{Layout::negative}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 5, 7}, t, lay(p, 0))}, 7,
              s_is(s) + " [s,5,7] " + layouts_str(p));
      }
      for (int64_t s : kSizes) {
        Rng rng(++seed);
        c.run({make_array(rng, {4, 5, s}, t, lay(p, 0))}, dbl(s),
              s_is(s) + " [4,5,s] " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: reshape with -1 ([s,4,8] -> [-1,32] and back, [s] -> [-1,1])",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1300;
  for (DType t : {DType::f32, DType::i32}) {
    // per_arg: only s is a symbol (in symbolic mode 4 and 8 would be symbols as well, and 4 * 8
    // a product of symbols: see the fallback cases).
    auto body = [](Tensor x) {
      Tensor flat = x.reshape({-1, 32});
      return std::vector<Tensor>{flat * 2.0,
                                 (flat + 1.0).reshape({-1, 4, 8}) + x,
                                 x.reshape({-1, 2, 16}),
                                 kiln::reshape(x, {-1, 8, 4}).sum(-1),
                                 x.reshape({-1, 32, 1}),
                                 flat.reshape({1, -1, 4, 8})};
    };
    auto c = dyn_case("reshape -1 " + dt(t), body, per_arg_mode({{0, {0}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided},
                             Pattern{Layout::transposed}, Pattern{Layout::offset}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 4, 8}, t, lay(p, 0))}, 4, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
  // A regrouping around the symbol: [s, 4, 8] -> [2, s, 16] keeps one symbol and the concrete
  // product, but moves the symbol inward: a row-major reshape, not a relabelling of dims.
  {
    auto body = [](Tensor x) { return x.reshape({2, -1, 16}) + 0.0f; };
    auto c = dyn_case("reshape [s,4,8] -> [2,-1,16]", body, per_arg_mode({{0, {0}}}));
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 4, 8}, DType::f32)}, 1, s_is(s));
    }
    c.expect_symbolic();
  }
  // symbolic mode: a 1-d tensor gains unit dims (its one symbol stays a dim of its own).
  {
    auto body = [](Tensor x, Tensor y) {
      return std::vector<Tensor>{x.reshape({-1, 1}) * y.reshape({1, -1}), x.reshape({1, -1, 1}),
                                 (x.reshape({-1, 1}) + 1.0f).reshape({-1})};
    };
    auto c = dyn_case("reshape [s] -> [-1,1]", body, symbolic_mode());
    for (const Pattern& p :
         {Pattern{Layout::contiguous}, Pattern{Layout::negative, Layout::strided}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s}, DType::f32, lay(p, 0)),
               make_array(rng, {7}, DType::f32, lay(p, 1))},
              1, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: index 0 and 1 on a symbolic axis, full slices, new axes, ellipsis",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1400;
  for (DType t : {DType::f32, DType::i8, DType::boolean}) {
    auto body = [](Tensor x) {  // x [s, 5, 7]: every dim a symbol
      return std::vector<Tensor>{x.index({Index::at(0)}),
                                 x.index({Index::at(1)}),
                                 x.index({Index::slice(), Index::at(1)}),
                                 x.index({Index::ellipsis(), Index::at(0)}),
                                 x.index({Index::at(1), Index::slice(), Index::at(0)}),
                                 x.index({Index::slice(), Index::new_axis()}),
                                 x.index({Index::new_axis(), Index::ellipsis(), Index::new_axis()}),
                                 x.index({Index::slice(), Index::slice(), Index::slice()}),
                                 x.index({Index::slice(0, std::nullopt, 1), Index::ellipsis()}),
                                 x.index({Index::at(0)}) == x.index({Index::at(1)})};
    };
    auto c = dyn_case("index " + dt(t), body, symbolic_mode());
    for (const Pattern& p :
         {Pattern{Layout::contiguous}, Pattern{Layout::strided}, Pattern{Layout::transposed},
          Pattern{Layout::negative}, Pattern{Layout::offset}}) {
      for (int64_t s : kSizes) {  // index 1 needs an extent of at least 2
        Rng rng(++seed);
        c.run({make_array(rng, {s, 5, 7}, t, lay(p, 0))}, 1, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
}

TEST_CASE("dynamic ops: broadcast_to with symbolic dims (-1) and new leading dims",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1500;
  // The target shape comes from the traced shapes: a symbolic dim reports -1, which broadcast_to
  // takes as "x's own symbolic dim here"; the reference trace sees the concrete extents.
  auto body = [](Tensor x, Tensor b) {  // x [s, 1], b [n]
    std::vector<int64_t> xs = x.symbolic_shape(), bs = b.symbolic_shape();
    return std::vector<Tensor>{
        kiln::broadcast_to(x, {xs[0], 6}), kiln::broadcast_to(x, {2, xs[0], 6}) * 2.0f,
        kiln::broadcast_to(b, {3, bs[0]}), kiln::broadcast_to(b, {2, 1, bs[0]}) + 1.0f};
  };
  auto c = dyn_case("broadcast_to", body, symbolic_mode());
  for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::negative},
                           Pattern{Layout::offset, Layout::zero_stride}}) {
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 1}, DType::f32, lay(p, 0)),
             make_array(rng, {s == 2 ? 5 : 2}, DType::f32, lay(p, 1))},
            1, s_is(s) + " " + layouts_str(p));
    }
    for (int64_t n : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {4, 1}, DType::f32, lay(p, 0)),
             make_array(rng, {n}, DType::f32, lay(p, 1))},
            1, "n=" + std::to_string(n) + " " + layouts_str(p));
    }
  }
  c.expect_symbolic();
}

// ------------------------------------------------------------------------------------------------
// concatenate, conv2d

TEST_CASE("dynamic ops: concatenate along a concrete axis of symbolic-row tensors",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1600;
  for (DType t : {DType::f32, DType::i32, DType::boolean, DType::bf16}) {
    // [s,5], [s,7] (int8), [s,1], [s,0]
    auto body = [](Tensor x, Tensor y, Tensor z, Tensor e) {
      return std::vector<Tensor>{kiln::concatenate({x, y}, 1), kiln::concatenate({x, z, x}, -1),
                                 kiln::concatenate({y, y}, 1) * 2.0,
                                 kiln::concatenate({z, x}, 1).sum(-1),
                                 kiln::concatenate({e, x, e, z}, 1)};
    };
    // per_arg: the rows are symbols, the column counts concrete.
    auto c = dyn_case("concatenate axis 1 " + dt(t), body,
                      per_arg_mode({{0, {0}}, {1, {0}}, {2, {0}}, {3, {0}}}));
    for (const Pattern& p : {Pattern{Layout::contiguous},
                             Pattern{Layout::strided, Layout::transposed, Layout::negative},
                             Pattern{Layout::offset, Layout::contiguous}}) {
      for (int64_t s : kSizes10) {
        Rng rng(++seed);
        c.run({make_array(rng, {s, 5}, t, lay(p, 0)), make_array(rng, {s, 7}, DType::i8, lay(p, 1)),
               make_array(rng, {s, 1}, t, lay(p, 2)), make_array(rng, {s, 0}, t, lay(p, 2))},
              13, s_is(s) + " " + layouts_str(p));
      }
    }
    c.expect_symbolic();
  }
  // symbolic mode: every dim of extent >= 2 is a symbol, so only an axis of extent 1 per piece is
  // concrete; concatenating those is expressible.
  auto body = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{kiln::concatenate({x, y}, 1),
                               kiln::concatenate({x, y, x}, -1) + 1.0f};
  };
  auto c = dyn_case("concatenate unit columns, symbolic mode", body, symbolic_mode());
  for (const Pattern& p : {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::offset}}) {
    for (int64_t s : kSizes10) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 1}, DType::f32, lay(p, 0)),
             make_array(rng, {s, 1}, DType::f32, lay(p, 1))},
            1, s_is(s) + " " + layouts_str(p));
    }
  }
  c.expect_symbolic();
}

TEST_CASE("dynamic ops: conv2d with a symbolic batch (float32)",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1700;
  struct Conv {
    const char* name;
    std::vector<int64_t> x, w;  // x without its batch dim
    kiln::Conv2dParams p;
  };
  kiln::Conv2dParams pad1;
  pad1.padding[0] = pad1.padding[1] = 1;
  kiln::Conv2dParams strided;
  strided.stride[0] = strided.stride[1] = 2;
  strided.groups = 2;
  kiln::Conv2dParams dilated;
  dilated.dilation[0] = 2;
  dilated.padding[1] = 1;
  const std::vector<Conv> convs = {{"3x3 pad 1", {3, 6, 6}, {4, 3, 3, 3}, pad1},
                                   {"stride 2 groups 2", {4, 7, 7}, {6, 2, 3, 3}, strided},
                                   {"dilation 2", {2, 7, 5}, {3, 2, 3, 2}, dilated}};
  for (const Conv& cv : convs) {
    kiln::Conv2dParams p = cv.p;
    auto body = [p](Tensor x, Tensor w, Tensor b) {
      return std::vector<Tensor>{kiln::conv2d(x, w, b, p),
                                 kiln::relu(kiln::conv2d(x, w, Tensor(), p))};
    };
    auto c = dyn_case(std::string("conv2d ") + cv.name, body, per_arg_mode({{0, {0}}}));
    const double kk = static_cast<double>(cv.w[1] * cv.w[2] * cv.w[3]);
    for (const Pattern& pat :
         {Pattern{Layout::contiguous}, Pattern{Layout::strided, Layout::contiguous},
          Pattern{Layout::transposed, Layout::negative}}) {
      for (int64_t s : {16, 32, 2, 3, 17, 1, 0}) {
        Rng rng(++seed);
        std::vector<int64_t> xs = {s};
        xs.insert(xs.end(), cv.x.begin(), cv.x.end());
        c.run({make_array(rng, xs, DType::f32, lay(pat, 0)),
               make_array(rng, cv.w, DType::f32, lay(pat, 1)),
               make_array(rng, {cv.w[0]}, DType::f32, lay(pat, 2))},
              kk, s_is(s) + " " + layouts_str(pat));
      }
    }
    c.expect_symbolic();
  }
}

// ------------------------------------------------------------------------------------------------
// Large extents: the thread split (parallel extent and grain) is evaluated per call from the
// symbols. These sizes give several chunks per kernel (about 64K operations each).

TEST_CASE("dynamic ops: large symbolic extents split across threads",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1750;
  for (DType t : {DType::f32, DType::i64}) {
    auto body = [](Tensor x, Tensor b) {
      return std::vector<Tensor>{(x * 2.0 + b) * x, kiln::maximum(x, b) - 1.0};
    };
    auto c = dyn_case("large elementwise " + dt(t), body, symbolic_mode());
    for (int64_t s : {16, 4099, 2400, 9001, 17, 4096}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 7}, t, s % 2 ? Layout::strided : Layout::contiguous),
             make_array(rng, {7}, t)},
            1, s_is(s));
    }
    c.expect_symbolic();
  }
  {
    auto body = [](Tensor x) {  // over the symbolic axis: few rows of many elements
      return std::vector<Tensor>{x.sum(0), x.max(0, true), x.mean(-2)};
    };
    auto c = dyn_case("large reduction over the symbolic axis", body, symbolic_mode());
    for (int64_t s : {4096, 20001, 9000, 3}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 7}, DType::f32, s % 2 ? Layout::transposed : Layout::contiguous)},
            dbl(s), s_is(s));
    }
    c.expect_symbolic();
  }
  {
    auto body = [](Tensor x, Tensor w) {  // many rows
      return std::vector<Tensor>{kiln::softmax(x), kiln::rms_norm(x, w)};
    };
    auto c = dyn_case("large row kernels", body, symbolic_mode());
    for (int64_t s : {2048, 2100, 3001, 5}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 64}, DType::f32, s % 2 ? Layout::offset : Layout::contiguous,
                        Values::wide),
             make_array(rng, {64}, DType::f32)},
            8, s_is(s));
    }
    c.expect_symbolic();
  }
  for (DType t : {DType::f32, DType::f64}) {
    auto body = [](Tensor x, Tensor w, Tensor b) { return kiln::relu(kiln::matmul(x, w) + b); };
    auto c = dyn_case("large matmul " + dt(t), body, symbolic_mode());
    for (int64_t s : {512, 517, 300, 1001, 7}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 24}, t, s % 2 ? Layout::strided : Layout::contiguous),
             make_array(rng, {24, 20}, t), make_array(rng, {20}, t)},
            24, s_is(s));
    }
    c.expect_symbolic();
  }
}

// ------------------------------------------------------------------------------------------------
// Caller-owned outputs with a zero extent after the first dim: Array::empty gives them strides
// that Array::is_contiguous rejects, and Function::call then refuses them ("must be a contiguous
// array of shape [5,0], got [5,0] (strided)"). Exact and symbolic variants alike.

TEST_CASE("dynamic ops: f.call into Array::empty outputs with a zero extent",
          "[jit][dynamic_ops]") {
  CHECK(Array::empty({5, 0}, DType::f32).is_contiguous());
  CHECK(Array::empty({2, 0, 3}, DType::f32).is_contiguous());
  auto body = [](Tensor x, Tensor w) { return kiln::matmul(x, w); };
  for (DynamicMode m : {DynamicMode::exact, DynamicMode::symbolic}) {
    Options o;
    o.dynamic = m;
    kiln::Function f = kiln::jit(body, o);
    std::vector<Array> in = {Array::empty({5, 24}, DType::f32), Array::empty({24, 0}, DType::f32)};
    std::vector<Array> out = {Array::empty({5, 0}, DType::f32)};
    CHECK_NOTHROW(f.call(in, out));
  }
}

// ------------------------------------------------------------------------------------------------
// The fallback: ops that cannot take a symbolic extent keep those dims exact, and say so; the
// symbols the program does take stay symbolic.

TEST_CASE("dynamic ops: a bounded slice on a symbolic axis keeps that axis exact",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1800;
  auto body = [](Tensor x) {
    return std::vector<Tensor>{x.index({Index::slice(1, std::nullopt)}) * 3.0f,
                               x.index({Index::slice(std::nullopt, std::nullopt, 2)}),
                               x.index({Index::slice(std::nullopt, -1)}).sum(0)};
  };
  auto c = dyn_case("bounded slice", body, symbolic_mode());
  const std::vector<int64_t> sizes = {4, 16, 5, 33, 4, 2, 16, 1};
  for (int64_t s : sizes) {
    Rng rng(++seed);
    c.run({make_array(rng, {s, 3}, DType::f32)}, dbl(s), s_is(s));
  }
  // Dim 0 exact: one variant per distinct extent; dim 1 (3) stays a symbol.
  c.expect_fallback({{0, 0}}, {{0, 1}},
                    static_cast<int64_t>(std::set<int64_t>(sizes.begin(), sizes.end()).size()));
}

TEST_CASE("dynamic ops: index -1 on a symbolic axis keeps that axis exact",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1850;
  auto body = [](Tensor x) { return x.index({Index::at(-1)}) + 1.0f; };
  auto c = dyn_case("index -1", body, symbolic_mode());
  for (int64_t s : {4, 16, 5, 4}) {
    Rng rng(++seed);
    c.run({make_array(rng, {s, 3}, DType::f32)}, 1, s_is(s));
  }
  c.expect_fallback({{0, 0}}, {{0, 1}}, 3);
}

TEST_CASE("dynamic ops: concatenate along a symbolic axis keeps that axis exact",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 1900;
  auto body = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{kiln::concatenate({x, y}, 0),
                               kiln::concatenate({y, x, y}, 0) * 2.0f};
  };
  auto c = dyn_case("concatenate axis 0", body, symbolic_mode());
  const std::vector<std::pair<int64_t, int64_t>> sizes = {
      {4, 5}, {16, 2}, {5, 4}, {4, 5}, {17, 17}};
  for (auto [a, b] : sizes) {
    Rng rng(++seed);
    c.run({make_array(rng, {a, 3}, DType::f32), make_array(rng, {b, 3}, DType::f32)}, 1,
          "rows " + std::to_string(a) + " and " + std::to_string(b));
  }
  // Both pieces' rows exact (4 distinct pairs); the shared column count stays a symbol.
  c.expect_fallback({{0, 0}, {1, 0}}, {{0, 1}, {1, 1}}, 4);
}

TEST_CASE("dynamic ops: reshapes merging symbols and conv2d spatial dims keep those dims exact",
          "[jit][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 2000;
  {
    // symbolic mode: 4 and 8 are symbols too, and [-1, 32] would need their product; the
    // leading dim alone is expressible and stays a symbol.
    auto body = [](Tensor x) { return x.reshape({-1, 32}) * 2.0f; };
    auto c = dyn_case("reshape merging symbols", body, symbolic_mode());
    for (int64_t s : {3, 16, 5, 3, 33, 1}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 4, 8}, DType::f32)}, 1, s_is(s));
    }
    c.expect_fallback({{0, 1}, {0, 2}}, {{0, 0}}, 2);  // s >= 2, and s = 1
  }
  {
    // symbolic mode: the channels, spatial dims and the weight are kept exact, the batch stays
    // a symbol.
    auto body = [](Tensor x, Tensor w) { return kiln::conv2d(x, w); };
    auto c = dyn_case("conv2d in symbolic mode", body, symbolic_mode());
    for (int64_t s : {2, 3, 16, 17, 2, 1}) {
      Rng rng(++seed);
      c.run({make_array(rng, {s, 3, 6, 6}, DType::f32), make_array(rng, {4, 3, 3, 3}, DType::f32)},
            27, s_is(s));
    }
    c.expect_fallback({{0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}, {1, 3}}, {{0, 0}}, 2);
  }
}
