// Reductions through the LLVM backend's two row_reduce kernels (src/codegen/llvm/lower_reduce.cpp):
// float sums accurate to a few float32 roundings over long axes (not n of them), and the columns
// kernel (a kept last axis walked innermost) against the reference interpreter: tile edges, many
// reductions in one group, reductions read back at every element, symbolic extents on both sides
// of the point where the columns kernel takes over.
#include "jit_dynamic_cases.h"
#include "needs_llvm.h"

#include <cmath>

using namespace jt_dynamic;

namespace {

// The exact (double) sum of each output's inputs, for inputs reduced along `axis` of a 2-d array.
std::vector<double> exact_sums(const HostTensor& x, int axis) {
  const int64_t r = x.shape[0], c = x.shape[1];
  std::vector<double> s(axis == 0 ? c : r, 0.0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) s[axis == 0 ? j : i] += x.values[i * c + j];
  return s;
}

// The largest relative error of `got` against `want`.
double worst_relative(const Array& got, const std::vector<double>& want, double scale = 1) {
  HostTensor g = HostTensor::from_array(got);
  REQUIRE(g.values.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(g.values[i] - want[i] * scale) / std::abs(want[i] * scale));
  return worst;
}

}  // namespace

TEST_CASE("jit reductions: float32 sums and means over long axes lose a few roundings, not n",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // Every element is 0.1f (each float32 addition of a running sum rounds the same way: the
  // worst case of a sequential sum) or uniform in [0.5, 1).
  const double eps = std::ldexp(1.0, -24);
  for (bool constant : {true, false}) {
    Rng rng(7);
    std::uniform_real_distribution<float> u(0.5f, 1.0f);
    auto fill = [&](std::vector<int64_t> shape) {
      TestArray a = make_array(rng, shape, DType::f32);
      auto* p = static_cast<float*>(a.array.data());
      const int64_t n = a.array.numel();
      for (int64_t i = 0; i < n; ++i) p[i] = constant ? 0.1f : u(rng);
      return a;
    };
    const std::string what = constant ? "0.1f" : "uniform [0.5, 1)";
    {  // the rows kernel: one long row, and rows of a matrix
      TestArray row = fill({1, 1 << 20});
      TestArray mat = fill({3, 300007});
      auto f = kiln::jit([](Tensor x, Tensor y) {
        return std::vector<Tensor>{x.sum(1), x.mean(1), y.sum(1), y.sum()};
      });
      std::vector<Array> out = f(std::vector<Array>{row.array, mat.array});
      const auto rs = exact_sums(row.host(), 1), ms = exact_sums(mat.host(), 1);
      const double all = ms[0] + ms[1] + ms[2];
      INFO(what);
      CHECK(worst_relative(out[0], rs) < 4 * eps);
      CHECK(worst_relative(out[1], rs, 1.0 / (1 << 20)) < 4 * eps);
      CHECK(worst_relative(out[2], ms) < 4 * eps);
      CHECK(worst_relative(out[3], {all}) < 4 * eps);
    }
    {  // the columns kernel: long columns, over one axis and over two
      TestArray mat = fill({200003, 9});
      TestArray cube = fill({301, 997, 8});
      auto f = kiln::jit([](Tensor x, Tensor y) {
        return std::vector<Tensor>{x.sum(0), x.mean(0, true), y.sum({0, 1})};
      });
      std::vector<Array> out = f(std::vector<Array>{mat.array, cube.array});
      const auto cs = exact_sums(mat.host(), 0);
      HostTensor c = cube.host();
      std::vector<double> cubes(8, 0.0);
      for (size_t i = 0; i < c.values.size(); ++i) cubes[i % 8] += c.values[i];
      INFO(what);
      CHECK(worst_relative(out[0], cs) < 4 * eps);
      CHECK(worst_relative(out[1], cs, 1.0 / 200003) < 4 * eps);
      CHECK(worst_relative(out[2], cubes) < 4 * eps);
    }
  }
}

TEST_CASE("jit reductions: the columns kernel over tile edges, dtypes and layouts",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9100;
  size_t k = 0;
  const std::vector<Layout> layouts = all_layouts();
  // Kept last extents on both sides of 8 (where the columns kernel starts) and of a tile; two
  // dtypes a case, in turn (each dtype three times; the compiles are the budget).
  const std::vector<DType>& dtypes = all_dtypes();
  size_t d = 0;
  for (int64_t cols : {7, 8, 33, 4097}) {
    for (int64_t rows : {0, 1, 70}) {
      for (DType t : {dtypes[d++ % dtypes.size()], dtypes[d++ % dtypes.size()]}) {
        Rng rng(++seed);
        const bool floating = kiln::is_floating(t);
        TestArray a = make_array(rng, {rows, cols}, t, layouts[k++ % layouts.size()]);
        check_against_reference(
            [rows, floating](Tensor x) {
              std::vector<Tensor> r = {x.sum(0), x.sum(0, true)};
              if (floating) {
                r.push_back(x.mean(0));
                r.push_back(x - x.mean(0, true));  // read back at every element
              }
              if (rows > 0) {
                r.push_back(x.max(0));
                r.push_back(kiln::min(x, 0, true));
              }
              return r;
            },
            {a},
            {.tol_scale = static_cast<double>(std::max<int64_t>(rows, 1)),
             .label =
                 label("columns " + std::to_string(rows) + "x" + std::to_string(cols), t, seed)});
      }
    }
  }
}

TEST_CASE("jit reductions: the columns kernel with middle axes, chained reductions and softmax",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9300;
  size_t d = 0;  // each float dtype once, each with a layout of its own
  for (Layout lay : {Layout::contiguous, Layout::transposed, Layout::negative, Layout::mixed}) {
    for (DType t : {float_dtypes()[d++]}) {
      Rng rng(++seed);
      TestArray a = make_array(rng, {4, 37, 19}, t, lay);
      check_against_reference(
          [](Tensor x) {
            Tensor centered = x - x.mean(1, true);
            return std::vector<Tensor>{x.sum(1),
                                       x.mean({0, 1}),
                                       x.max({0, 1}, true),
                                       (centered * centered).mean(1),  // a reduction of one
                                       kiln::softmax(x, 1),
                                       kiln::softmax(x, 0)};
          },
          {a},
          {.tol_scale = 148,
           .label = label(std::string("middle axes ") + layout_name(lay), t, seed)});
    }
  }
}

TEST_CASE("jit reductions: a group of many reductions takes narrower column tiles",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // 24 reductions in one group: 24 * 24 bytes a column leaves room for tiles of 227 columns of
  // the 1200 (several tiles a row), where one reduction alone would take 4096.
  Rng rng(9400);
  TestArray a = make_array(rng, {21, 1200}, DType::f32, Layout::strided);
  check_against_reference(
      [](Tensor x) {
        Tensor acc = x.sum(0);
        for (int i = 1; i < 24; ++i) acc = acc + (x * static_cast<double>(i)).max(0);
        return std::vector<Tensor>{acc};
      },
      {a}, {.tol_scale = 600, .label = "24 reductions"});
}

TEST_CASE("jit reductions: a symbolic kept last axis takes either kernel at run time",
          "[jit][reduce][dynamic_ops]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9500;
  for (DType t : {DType::f32, DType::i64, DType::bf16}) {
    auto body = [](Tensor x) {
      return std::vector<Tensor>{x.sum(0), x.mean(0, true), x.max(0), x - x.sum(0, true)};
    };
    auto c = dyn_case("columns " + dt(t), body, per_arg_mode({{0, {1}}}));
    for (int64_t s : kSizes1) {  // 1, 2, 3 take the rows kernel, the others the columns kernel
      Rng rng(++seed);
      c.run({make_array(rng, {23, s}, t, s % 2 ? Layout::transposed : Layout::contiguous)}, 23,
            s_is(s));
    }
    c.expect_symbolic();
  }
}

TEST_CASE("jit reductions: softmax over a symbolic axis keeps exp in the output",
          "[jit][reduce][dynamic_ops]" KILN_NEEDS_LLVM) {
  // A symbolic reduced axis has no stack bound: the columns kernel (axis 0 of [s, 40]) and the
  // rows kernel (axis 1 of [3, s]) keep exp(x - max) in the output (float32, float64), read it
  // only at the element being written, and compute it again elsewhere (the flip along the other
  // axis reads it at other elements); bfloat16 keeps nothing.
  uint64_t seed = 9550;
  const kiln::Index all = kiln::Index::slice(), flip = kiln::Index::slice({}, {}, -1);
  for (int64_t axis : {0, 1}) {
    // One function per pattern (outputs that share exp(x - max) would materialize it).
    const std::vector<std::function<Tensor(Tensor)>> fns = {
        [axis](Tensor x) { return kiln::softmax(x, axis); },
        [&, axis](Tensor x) {
          Tensor e = kiln::exp(x - x.max(axis, true));
          return e / e.sum(axis, true) + (axis == 0 ? e.index({all, flip}) : e.index({flip, all}));
        }};
    for (DType t : {DType::f32, DType::f64, DType::bf16}) {
      for (size_t f = 0; f < fns.size(); ++f) {
        auto c = dyn_case("softmax over s, axis " + std::to_string(axis) + " " + dt(t) + " fn " +
                              std::to_string(f),
                          fns[f], per_arg_mode({{0, {static_cast<int>(axis)}}}));
        for (int64_t s : {16, 300, 2, 3, 17, 333, 1}) {
          Rng rng(++seed);
          const std::vector<int64_t> shape =
              axis == 0 ? std::vector<int64_t>{s, 40} : std::vector<int64_t>{3, s};
          c.run({make_array(rng, shape, t, s % 2 ? Layout::transposed : Layout::contiguous)},
                std::sqrt(static_cast<double>(s)), s_is(s));
        }
        c.expect_symbolic();
      }
    }
  }
}

TEST_CASE("jit reductions: a large tensor reduced to one value (split in two) over dtypes",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  uint64_t seed = 9600;
  size_t k = 0;
  const std::vector<Layout> layouts = all_layouts();
  // Split as [256, 1024], split over the leading 64, and a size the pass leaves whole.
  const std::vector<std::vector<int64_t>> shapes = {{1 << 18}, {64, 4099}, {(1 << 18) + 3}};
  for (const auto& shape : shapes) {
    for (DType t : {DType::f32, DType::bf16, DType::i32, DType::boolean}) {
      if (shape == shapes.back() && t != DType::f32) continue;
      Rng rng(++seed);
      const bool floating = kiln::is_floating(t);
      TestArray a = make_array(rng, shape, t, layouts[k++ % layouts.size()]);
      check_against_reference(
          [floating](Tensor x) {
            std::vector<Tensor> r = {x.sum(), x.max(), kiln::min(x, {}, true)};
            if (floating) {
              r.push_back(x.mean(kiln::Axes(), true));
              r.push_back(((x - 1.0) * (x - 1.0)).mean());  // fused into the first step
            }
            return r;
          },
          {a}, {.tol_scale = 64, .label = label("whole " + dims_str(shape), t, seed)});
    }
  }
}

TEST_CASE("jit reductions: the rows kernel keeps a summed value the root reads again",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // softmax's exp(x - max) is summed, then divided by the sum: rows up to 8192 long keep it
  // instead of computing it twice; the root may read it at any column of the row (the flip), two
  // reductions may share it, and a value read at other rows is computed there. Longer rows keep
  // it in a float32 or float64 output, read there only at the element being written.
  uint64_t seed = 9700;
  size_t k = 0;
  const std::vector<Layout> layouts = all_layouts();
  for (int64_t cols : {1, 7, 1024, 8192, 8193}) {
    for (DType t : float_dtypes()) {
      if (cols >= 8192 && t == DType::f16) continue;
      Rng rng(++seed);
      TestArray a = make_array(rng, {3, cols}, t, layouts[k++ % layouts.size()], Values::wide);
      // One function each: a value shared by several outputs is stored between kernels.
      auto e_of = [](Tensor x) { return kiln::exp(x - x.max(-1, true)); };
      const std::vector<std::function<Tensor(Tensor)>> fns = {
          [](Tensor x) { return kiln::softmax(x, -1); },
          [e_of](Tensor x) {
            Tensor e = e_of(x);
            return e / e.sum(-1, true) + e.index({Index::slice(), Index::slice({}, {}, -1)});
          },
          [e_of](Tensor x) {
            Tensor e = e_of(x);
            return e * e.max(-1, true) - e.mean(-1, true);
          },
          [](Tensor x) {  // read at other rows too: those are computed, not kept
            Tensor e = kiln::exp(x * 0.25);
            return e / e.sum(-1, true) + e.index({Index::slice({}, {}, -1), Index::slice()});
          }};
      for (size_t f = 0; f < fns.size(); ++f)
        check_against_reference(
            fns[f], {a},
            {.tol_scale = std::sqrt(static_cast<double>(cols)),
             .label = label("kept row of " + std::to_string(cols) + " fn " + std::to_string(f), t,
                            seed)});
    }
  }
}

TEST_CASE("jit reductions: the columns kernel keeps a summed value the root reads again",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // The same over a leading or middle axis of up to 256 rows (128 of float64): the columns kernel
  // keeps exp(x - max) for its tile's columns; the root may read it at any row of the reduced axis
  // (the flip along it), two reductions may share it, and a value read at other columns is
  // computed there. Longer axes (257 rows and up) keep it in the output where the output's dtype
  // is its compute type (float32, float64): read there only at the element being written (the
  // flip computes it again), and not at all for float16 and bfloat16.
  uint64_t seed = 9800;
  size_t k = 0;
  const std::vector<Layout> layouts = all_layouts();
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 8},    {7, 130},    {100, 33},  {128, 1000}, {256, 136},
      {257, 40}, {3, 60, 17}, {1030, 19}, {600, 136},  {2, 700, 9}};
  for (const auto& shape : shapes) {
    for (DType t : float_dtypes()) {
      // Long axes in float32 and float64, and once in bfloat16 (which its output cannot keep).
      const bool f32_or_f64 = t == DType::f32 || t == DType::f64;
      if (shape[0] >= 128 && !f32_or_f64 && !(shape[0] == 1030 && t == DType::bf16)) continue;
      Rng rng(++seed);
      TestArray a = make_array(rng, shape, t, layouts[k++ % layouts.size()], Values::wide);
      const int64_t axis = static_cast<int64_t>(shape.size()) - 2;
      auto e_of = [axis](Tensor x) { return kiln::exp(x - x.max(axis, true)); };
      const Index all = Index::slice(), flip = Index::slice({}, {}, -1);
      auto flipped = [&](int64_t at) {  // an index reversing axis `at` of x
        std::vector<Index> idx(shape.size(), all);
        idx[static_cast<size_t>(at)] = flip;
        return idx;
      };
      const auto along_reduced = flipped(axis), along_last = flipped(axis + 1);
      const std::vector<std::function<Tensor(Tensor)>> fns = {
          [axis](Tensor x) { return kiln::softmax(x, axis); },
          [e_of, axis, along_reduced](Tensor x) {
            Tensor e = e_of(x);
            return e / e.sum(axis, true) + e.index(along_reduced);
          },
          [e_of, axis](Tensor x) {
            Tensor e = e_of(x);
            return e * e.max(axis, true) - e.mean(axis, true);
          },
          [axis, along_last](Tensor x) {  // read at other columns too: those are computed
            Tensor e = kiln::exp(x * 0.25);
            return e / e.sum(axis, true) + e.index(along_last);
          }};
      for (size_t f = 0; f < fns.size(); ++f)
        check_against_reference(
            fns[f], {a},
            {.tol_scale = std::sqrt(static_cast<double>(shape[static_cast<size_t>(axis)])),
             .label = label("kept columns of " + jt::dims_str(shape) + " fn " + std::to_string(f),
                            t, seed)});
    }
  }
}

TEST_CASE("jit reductions: the rows kernel walks a row of several blocks in a loop",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // Unrolled whole, a row of 4096 float32 had its 8 blocks' partial sums interleaved and read out
  // of address order, and one core streamed at 8-9 GB/s; walked block after block it reads in
  // order. The listing then has one block's vector adds (64 on AVX2, 32 on AVX-512), not the
  // row's (512, 256).
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  Rng rng(9900);
  for (int64_t cols : {4096, 5000}) {
    TestArray a = make_array(rng, {3, cols}, DType::f32, Layout::contiguous);
    auto body = [](Tensor x) { return x.sum(-1); };
    Function f = kiln::jit(body);
    CheckOptions opt;
    opt.function = &f;
    opt.tol_scale = 64;
    opt.label = "row of " + std::to_string(cols);
    CHECK(check_against_reference(body, {a}, opt));
    kiln::Inspection ins = f.inspect({a.array});
    REQUIRE(ins.kernels.size() == 1);
    const std::string& text = ins.kernels[0].asm_text;
    INFO(text.substr(0, 3000));
    CHECK(count(text, "vaddps") > 0);
    CHECK(count(text, "vaddps") <= 128);
  }
}

TEST_CASE("jit reductions: max and min propagate a NaN from any element of long rows and columns",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // Their vector loops take -0 and +0 as equal (either may come out, as in numpy), which saves two
  // blends per vector; a NaN anywhere, in any partial maximum, must still reach the result.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  uint64_t seed = 9950;
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    for (int64_t cols : {1, 7, 33, 1000, 4096, 5000}) {
      Rng rng(++seed);
      const int64_t rows = 6;
      std::vector<double> v(static_cast<size_t>(rows * cols));
      for (double& e : v) e = uniform_real(rng, -4, 4);
      // Row 0 has no NaN; the others one each: first, last, in the middle, in a vector
      // remainder, and a row of NaN only.
      const std::vector<int64_t> at = {0, cols - 1, cols / 2, cols - 1 - (cols % 8), -1};
      for (int64_t r = 1; r < rows; ++r) {
        if (at[r - 1] < 0)
          for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = nan;
        else
          v[r * cols + at[r - 1]] = nan;
      }
      TestArray a = make_array_from({rows, cols}, t, v);
      check_against_reference(
          [](Tensor x) {
            return std::vector<Tensor>{x.max(1), x.min(1), x.max(0), x.min(0)};
          },
          {a}, {.label = label("NaN in rows of " + std::to_string(cols), t, seed)});
      TestArray no_nan =
          make_array_from({1, cols}, t, std::vector<double>(v.begin(), v.begin() + cols));
      TestArray whole = make_array_from({rows, cols}, t, v);
      check_against_reference(
          [](Tensor x, Tensor y) {
            return std::vector<Tensor>{x.max(), y.min()};
          },
          {no_nan, whole}, {.label = label("whole max/min", t, seed)});
    }
  }
  // Zeros of both signs: a zero comes out (its sign is not compared).
  TestArray z = make_array_from({2, 64}, DType::f32, std::vector<double>(128, -0.0));
  static_cast<float*>(z.array.data())[70] = 0.0f;
  check_against_reference(
      [](Tensor x) {
        return std::vector<Tensor>{x.max(1), x.min(1)};
      },
      {z}, {.label = "zeros"});
}

TEST_CASE("jit reductions: float max and min reductions ignore the sign of zero in LLVM IR",
          "[jit][reduce]" KILN_NEEDS_LLVM) {
  // The flag that saves the blends (see the NaN test above): llvm.maximum/minimum with nsz.
  Rng rng(9990);
  TestArray a = make_array(rng, {3, 4096}, DType::f32, Layout::contiguous);
  for (bool max : {true, false}) {
    auto body = [max](Tensor x) { return max ? x.max(1) : x.min(1); };
    Function f = kiln::jit(body);
    kiln::Inspection ins = f.inspect({a.array});
    REQUIRE(ins.kernels.size() == 1);
    const std::string& src = ins.kernels[0].source;
    INFO(src.substr(0, 3000));
    const std::string name = max ? "@llvm.maximum" : "@llvm.minimum";
    const bool nsz = src.find("nsz contract <8 x float> " + name) != std::string::npos ||
                     src.find("nsz contract <16 x float> " + name) != std::string::npos;
    CHECK(nsz);
  }
}
