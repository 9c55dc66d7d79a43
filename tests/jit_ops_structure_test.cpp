// Differential tests of the C++ API's contractions and data movement: matmul (1-d, 2-d, batched
// with broadcast batch dims, transposed and strided operands, fused producers and consumers),
// conv2d, reshape/transpose/broadcast_to, concatenate, astype, indexing, outputs that alias
// inputs, and one function reused across layouts; kiln::jit against the reference interpreter
// over seeded random shapes and every dtype each op takes. Elementwise ops, reductions and
// norms: jit_ops_test.cpp.
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <set>
#include <tuple>

using namespace jt;
using kiln::Index;
using kiln::Tensor;

TEST_CASE("jit ops: matmul 1-d, 2-d, batched with broadcast batch dims",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  struct M {
    std::vector<int64_t> a, b;
  };
  const std::vector<M> shapes = {{{7}, {7}},
                                 {{1}, {1}},
                                 {{5, 7}, {7}},
                                 {{7}, {7, 3}},
                                 {{1, 1}, {1, 1}},
                                 {{3, 0}, {0, 4}},
                                 {{0, 5}, {5, 3}},
                                 {{17, 33}, {33, 130}},
                                 {{33, 17}, {17, 1}},
                                 {{1, 130}, {130, 33}},
                                 {{2, 5, 7}, {7, 3}},
                                 {{5, 7}, {3, 7, 4}},
                                 {{2, 1, 5, 7}, {3, 7, 4}},
                                 {{4, 3, 9}, {4, 9, 5}},
                                 {{2, 3, 4}, {4}},
                                 {{64, 64}, {64, 64}},
                                 {{3}, {2, 3, 5}}};
  uint64_t seed = 7000;
  size_t k = 0;
  for (const M& m : shapes) {
    for (DType t :
         {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i32, DType::i64}) {
      // All dtypes on a few shapes, float32 and one other dtype on the rest (budget).
      bool all = k < 5 * 7 || t == DType::f32 || t == (k % 2 ? DType::i32 : DType::bf16);
      ++k;
      if (!all) continue;
      Rng rng(++seed);
      TestArray a = make_array(rng, m.a, t, layout_n(k));
      TestArray b = make_array(rng, m.b, t, layout_n(k + 3));
      double kk = static_cast<double>(m.a.back());
      check_against_reference(
          [](Tensor x, Tensor y) { return kiln::matmul(x, y); }, {a, b},
          {.tol_scale = std::max(1.0, kk),
           .label = label("matmul " + dims_str(m.a) + " @ " + dims_str(m.b), t, seed)});
    }
  }
}

TEST_CASE("jit ops: matmul of transposed operands (.T) and strided views",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 7500;
  for (auto [mm, kk, nn] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 7, 3}, {17, 33, 9}, {1, 130, 1}, {64, 16, 33}}) {
    for (Layout lay : {Layout::contiguous, Layout::transposed, Layout::strided, Layout::negative}) {
      Rng rng(++seed);
      TestArray at = make_array(rng, {kk, mm}, DType::f32, lay);  // used as a.T
      TestArray bt = make_array(rng, {nn, kk}, DType::f32, lay);  // used as b.T
      TestArray b = make_array(rng, {kk, nn}, DType::f32, Layout::offset);
      check_against_reference(
          [](Tensor x, Tensor y, Tensor z) {
            return std::vector<Tensor>{kiln::matmul(x.T(), z), kiln::matmul(x.T(), y.T()),
                                       kiln::operator_matmul(y, x)};
          },
          {at, bt, b},
          {.tol_scale = static_cast<double>(std::max(kk, mm)),
           .label =
               "matmul .T " + std::string(layout_name(lay)) + " seed " + std::to_string(seed)});
    }
  }
}

TEST_CASE("jit ops: matmul with fused producers and consumers", "[jit][ops]" KILN_NEEDS_LLVM) {
  Rng rng(7600);
  TestArray x = make_array(rng, {9, 33}, DType::f32);
  TestArray w = make_array(rng, {33, 17}, DType::f32, Layout::transposed);
  TestArray b = make_array(rng, {17}, DType::f32);
  check_against_reference(
      [](Tensor xx, Tensor ww, Tensor bb) {
        Tensor h = kiln::matmul(kiln::tanh(xx) * 2.0, ww) + bb;
        return std::vector<Tensor>{kiln::relu(h), kiln::gelu(h).sum(1)};
      },
      {x, w, b}, {.tol_scale = 33 * 17, .label = "mlp layer"});
}

TEST_CASE("jit ops: conv2d stride, padding, dilation, groups, bias", "[jit][ops]" KILN_NEEDS_LLVM) {
  struct C {
    int64_t n, c, h, w, o, kh, kw;
    kiln::Conv2dParams p;
    bool bias;
  };
  auto P = [](int64_t s0, int64_t s1, int64_t p0, int64_t p1, int64_t d0, int64_t d1, int64_t g) {
    kiln::Conv2dParams p;
    p.stride[0] = s0;
    p.stride[1] = s1;
    p.padding[0] = p0;
    p.padding[1] = p1;
    p.dilation[0] = d0;
    p.dilation[1] = d1;
    p.groups = g;
    return p;
  };
  const std::vector<C> cases = {
      {1, 1, 5, 5, 1, 3, 3, P(1, 1, 0, 0, 1, 1, 1), false},
      {2, 3, 8, 9, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true},
      {1, 3, 9, 8, 5, 3, 2, P(2, 1, 0, 1, 1, 1, 1), true},
      {1, 4, 9, 9, 6, 3, 3, P(1, 2, 2, 0, 2, 1, 2), false},
      {2, 4, 7, 7, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 4), true},   // depthwise
      {1, 2, 1, 1, 3, 1, 1, P(1, 1, 0, 0, 1, 1, 1), true},   // 1x1 on a 1x1 image
      {1, 3, 5, 5, 2, 5, 5, P(1, 1, 0, 0, 1, 1, 1), false},  // kernel = image
      {1, 3, 17, 13, 8, 3, 3, P(2, 2, 1, 1, 2, 2, 1), true},
      {0, 3, 5, 5, 2, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true},  // empty batch
      {1, 6, 6, 6, 9, 1, 3, P(3, 1, 0, 2, 1, 3, 3), true},
  };
  uint64_t seed = 8000;
  size_t k = 0;
  for (const C& c : cases) {
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32}) {
      if (t != DType::f32 && k++ % 3 != 0) continue;  // budget: float32 always, others in turn
      Rng rng(++seed);
      TestArray x = make_array(rng, {c.n, c.c, c.h, c.w}, t, layout_n(seed));
      TestArray w = make_array(rng, {c.o, c.c / c.p.groups, c.kh, c.kw}, t, layout_n(seed + 2));
      TestArray b = make_array(rng, {c.o}, t);
      double kk = static_cast<double>(c.c / c.p.groups * c.kh * c.kw);
      kiln::Conv2dParams p = c.p;
      std::string what =
          "conv2d x " + dims_str(x.array.shape()) + " w " + dims_str(w.array.shape()) + " stride " +
          std::to_string(p.stride[0]) + "," + std::to_string(p.stride[1]) + " pad " +
          std::to_string(p.padding[0]) + "," + std::to_string(p.padding[1]) + " dil " +
          std::to_string(p.dilation[0]) + "," + std::to_string(p.dilation[1]) + " groups " +
          std::to_string(p.groups) + " bias " + std::to_string(c.bias);
      if (c.bias)
        check_against_reference(
            [p](Tensor xx, Tensor ww, Tensor bb) { return kiln::conv2d(xx, ww, bb, p); }, {x, w, b},
            {.tol_scale = kk, .label = label(what, t, seed)});
      else
        check_against_reference(
            [p](Tensor xx, Tensor ww) { return kiln::conv2d(xx, ww, Tensor(), p); }, {x, w},
            {.tol_scale = kk, .label = label(what, t, seed)});
    }
  }
}

TEST_CASE("jit ops: reshape, transpose, broadcast_to on every dtype",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9000;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {6, 4, 5}, t, layout_n(k++));
    TestArray v = make_array(rng, {5, 1}, t, layout_n(k++));
    check_against_reference(
        [](Tensor x, Tensor y) {
          return std::vector<Tensor>{
              x.reshape({2, 3, 20}),
              x.reshape({-1}),
              kiln::reshape(x, {4, -1}),
              x.transpose({2, 0, 1}),
              x.T(),
              kiln::transpose(x, {0, 2, 1}),
              kiln::broadcast_to(y, {3, 5, 7}),
              x.T().reshape({5, 24}),
              x.transpose({1, 0, 2}).reshape({4, 30}) +
                  kiln::broadcast_to(y, {1, 5, 1}).reshape({1, 5}).sum().reshape({1, 1})};
        },
        {a, v}, {.tol_scale = 5, .label = label("views", t, seed)});
  }
  // Scalars and size-0/1 shapes.
  Rng rng(++seed);
  check_against_reference(
      [](Tensor s, Tensor z, Tensor o) {
        return std::vector<Tensor>{
            kiln::broadcast_to(s, {3, 4}),    s.reshape({1, 1}), z.reshape({0, 3}), z.T(),
            kiln::broadcast_to(o, {2, 0, 4}), o.reshape({})};
      },
      {make_array(rng, {}, DType::f32), make_array(rng, {3, 0}, DType::f32),
       make_array(rng, {1, 1}, DType::f32)},
      {.label = "scalar and empty views"});
}

TEST_CASE("jit ops: concatenate along each axis, mixed dtypes, empty pieces",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9100;
  size_t k = 0;
  for (DType t : all_dtypes()) {
    Rng rng(++seed);
    TestArray a = make_array(rng, {3, 4, 5}, t, layout_n(k++));
    TestArray b = make_array(rng, {3, 1, 5}, t, layout_n(k++));
    TestArray c = make_array(rng, {3, 4, 2}, t, layout_n(k++));
    TestArray e = make_array(rng, {3, 0, 5}, t);
    check_against_reference(
        [](Tensor x, Tensor y, Tensor z, Tensor w) {
          return std::vector<Tensor>{kiln::concatenate({x, y, x}, 1), kiln::concatenate({x, z}, -1),
                                     kiln::concatenate({x, x}, 0), kiln::concatenate({y, w, y}, 1),
                                     kiln::concatenate({x.index({Index::slice(1)}), x}, 0)};
        },
        {a, b, c, e}, {.label = label("concatenate", t, seed)});
  }
  Rng rng(++seed);
  check_against_reference(
      [](Tensor x, Tensor y, Tensor z) {
        return kiln::concatenate({x, y, z}, 0);
      },
      {make_array(rng, {2, 3}, DType::i8), make_array(rng, {1, 3}, DType::f16),
       make_array(rng, {4, 3}, DType::i32, Layout::transposed)},
      {.label = "concatenate i8 f16 i32"});
}

TEST_CASE("jit ops: index with slices, steps, negative steps, integers, new axes, ellipsis",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  using I = Index;
  const std::vector<std::pair<std::string, std::vector<I>>> cases = {
      {"[1:5]", {I::slice(1, 5)}},
      {"[:, ::2]", {I::slice(), I::slice({}, {}, 2)}},
      {"[::-1]", {I::slice({}, {}, -1)}},
      {"[..., None]", {I::ellipsis(), I::new_axis()}},
      {"[0]", {I::at(0)}},
      {"[-1, 2:]", {I::at(-1), I::slice(2)}},
      {"[None, ..., 1]", {I::new_axis(), I::ellipsis(), I::at(1)}},
      {"[5:1:-2]", {I::slice(5, 1, -2)}},
      {"[:0]", {I::slice({}, 0)}},
      {"[:, :, ::-3]", {I::slice(), I::slice(), I::slice({}, {}, -3)}},
      {"[-2::-1, 1::3, -1]", {I::slice(-2, {}, -1), I::slice(1, {}, 3), I::at(-1)}},
      {"[2, 3, 4]", {I::at(2), I::at(3), I::at(4)}},
      {"[..., ::2, None]", {I::ellipsis(), I::slice({}, {}, 2), I::new_axis()}},
      {"[100:]", {I::slice(100)}},
      {"[-100:3]", {I::slice(-100, 3)}},
      {"[:, -100::-1]", {I::slice(), I::slice(-100, {}, -1)}},
  };
  uint64_t seed = 9300;
  size_t k = 0;
  for (const auto& [name, idx] : cases) {
    for (DType t : {DType::f32, k % 2 ? DType::i8 : DType::bf16}) {
      Rng rng(++seed);
      TestArray a = make_array(rng, {7, 9, 5}, t, layout_n(k++));
      auto ix = idx;
      check_against_reference([ix](Tensor x) { return x.index(ix) * 2.0; }, {a},
                              {.label = label("index " + name, t, seed)});
    }
  }
  // x.sum(1)[:, None] + y, and an index of an index.
  Rng rng(++seed);
  check_against_reference(
      [](Tensor x, Tensor y) {
        Tensor s = x.sum(1).index({I::slice(), I::new_axis()});
        return std::vector<Tensor>{
            s + y, x.index({I::slice({}, {}, -1)}).index({I::slice(1, {}, 2), I::at(-2)})};
      },
      {make_array(rng, {6, 9}, DType::f32, Layout::negative), make_array(rng, {6, 9}, DType::f32)},
      {.tol_scale = 9, .label = "x.sum(1)[:, None] + y"});
}

TEST_CASE("jit ops: outputs that alias inputs, repeat or are constants",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  Rng rng(9400);
  TestArray a = make_array(rng, {5, 7}, DType::f32, Layout::negative);
  check_against_reference([](Tensor x) { return x; }, {a},
                          {.label = "identity of a strided input"});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.T(), x, x.T()};
      },
      {a}, {.label = "views of the input, repeated"});
  check_against_reference(
      [](Tensor x) {
        Tensor y = kiln::exp(x);
        return std::vector<Tensor>{y, y, y + 1.0};
      },
      {a}, {.label = "the same value twice"});
  const float cdata[6] = {1, 2, 3, 4, 5, 6};
  check_against_reference(
      [cdata](Tensor x) {
        Tensor c = kiln::constant(cdata, {2, 3}, DType::f32);
        return std::vector<Tensor>{c, kiln::scalar(2.5, DType::f16),
                                   x.index({Index::slice(0, 2), Index::slice(0, 3)}) * c};
      },
      {a}, {.label = "constant outputs"});
  check_against_reference([](Tensor x) { return kiln::exp(x); }, {a},
                          {.label = "f.call into caller outputs", .call_into_outputs = true});
}

TEST_CASE("jit ops: one function reused across layouts reads runtime strides",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  // Same shape, different strides: the signature only records "strided", so one compiled kernel
  // must read each call's strides.
  auto fn = [](Tensor x, Tensor y) { return kiln::tanh(x) * y + x.sum(1, true); };
  kiln::Function f = kiln::jit(fn);
  uint64_t seed = 9500;
  // The signature classes seen: contiguous or not, per argument (alignment is not one).
  std::set<std::vector<bool>> classes;
  for (Layout lay : all_layouts()) {
    Rng rng(++seed);
    TestArray x = make_array(rng, {9, 17}, DType::f32, lay);
    TestArray y = make_array(rng, {9, 17}, DType::f32, layout_n(seed));
    std::vector<bool> cls;
    for (const TestArray* t : {&x, &y}) cls.push_back(t->array.is_contiguous());
    classes.insert(cls);
    check_against_reference(
        fn, {x, y},
        {.tol_scale = 17, .label = std::string("reuse ") + layout_name(lay), .function = &f});
  }
  CHECK(f.stats().compiles == static_cast<int64_t>(classes.size()));
  CHECK(f.stats().calls == static_cast<int64_t>(all_layouts().size()));
}

TEST_CASE("jit ops: astype between every pair of dtypes", "[jit][ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9200;
  size_t k = 0;
  for (DType from : all_dtypes()) {
    for (DType to : all_dtypes()) {
      Rng rng(++seed);
      TestArray a = make_array(rng, {7, 5}, from, layout_n(k++), Values::wide);
      check_against_reference([to](Tensor x) { return x.astype(to); }, {a},
                              {.label = "astype " + dt(from) + " -> " + dt(to)});
    }
  }
}

TEST_CASE("jit ops: astype edge values (wrap, truncation toward zero, rounding)",
          "[jit][ops]" KILN_NEEDS_LLVM) {
  auto ints = make_array_from({8}, DType::i32, {200, -200, 1000, 127, 128, -129, 65535, -1});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.astype(DType::i8), x.astype(DType::boolean)};
      },
      {ints}, {.label = "i32 -> i8 wrap"});
  auto floats = make_array_from({10}, DType::f32,
                                {2.7, -2.7, 0.5, -0.5, 1e-8, -0.0, 126.9, -127.9, 65520, 3.14159});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.astype(DType::i8),   x.astype(DType::i32),
                                   x.astype(DType::i64),  x.astype(DType::f16),
                                   x.astype(DType::bf16), x.astype(DType::boolean)};
      },
      {floats}, {.label = "f32 -> ints, halves, bool"});
  auto i64s = make_array_from(
      {4}, DType::i64, {int64_t{1} << 40, -(int64_t{1} << 40) - 3, (int64_t{1} << 31) + 5, 7});
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.astype(DType::i32), x.astype(DType::i8), x.astype(DType::f64),
                                   x.astype(DType::f32)};
      },
      {i64s}, {.label = "i64 -> narrower"});
}
