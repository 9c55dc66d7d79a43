// The cost of dispatch with dynamic shapes, in one run: checking a symbolic variant's guards
// (VariantGuard::bind) for the serving MLP's four arguments, and a whole call of a tiny function
// (x + 1 on float32[rows, 8]) served by an exact variant vs by a symbolic variant.
//
//   build/benchmarks/dispatch_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include "jit/variant_guard.h"

#include <benchmark/benchmark.h>
#include <kiln/kiln.h>

#include <vector>

namespace {

using kiln::Array;

// The MLP block's arguments: x [T, 256], w1 [256, 1024], b1 [1024], w2 [1024, 256].
struct MlpArgs {
  std::vector<float> x, w1, b1, w2;
  std::vector<Array> arrays;
  explicit MlpArgs(int64_t t) : x(t * 256), w1(256 * 1024), b1(1024), w2(1024 * 256) {
    arrays = {
        Array::view(x.data(), {t, 256}, kiln::f32), Array::view(w1.data(), {256, 1024}, kiln::f32),
        Array::view(b1.data(), {1024}, kiln::f32), Array::view(w2.data(), {1024, 256}, kiln::f32)};
  }
};

kiln::VariantGuard mlp_guard() {
  kiln::VariantGuard g;
  auto arg = [](kiln::ir::Shape dims) {
    kiln::ArgGuard a;
    a.dims = std::move(dims);
    return a;
  };
  using kiln::ir::Dim;
  g.args = {arg({Dim::symbol(0), Dim::concrete(256)}),
            arg({Dim::concrete(256), Dim::concrete(1024)}), arg({Dim::concrete(1024)}),
            arg({Dim::concrete(1024), Dim::concrete(256)})};
  g.facts = {kiln::ir::SymbolFact{false}};
  return g;
}

void BM_guard_bind_mlp(benchmark::State& state) {
  MlpArgs args(state.range(0));
  kiln::VariantGuard g = mlp_guard();
  int64_t dims[1];
  for (auto _ : state) {
    bool ok = g.bind(args.arrays, dims);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(dims[0]);
  }
}
BENCHMARK(BM_guard_bind_mlp)->Arg(37)->Arg(512);

void call_tiny(benchmark::State& state, kiln::DynamicMode mode) {
  kiln::Options o;
  o.dynamic = mode;
  kiln::Function f = kiln::jit([](kiln::Tensor x) { return x + 1.0f; }, o);
  const int64_t rows = state.range(0);
  std::vector<float> x(rows * 8, 1.0f), y(rows * 8);
  std::vector<Array> in = {Array::view(x.data(), {rows, 8}, kiln::f32)};
  std::vector<Array> out = {Array::view(y.data(), {rows, 8}, kiln::f32)};
  // Settle the variant first (symbolic mode: one variant for every rows >= 2).
  std::vector<float> x2(3 * 8, 1.0f), y2(3 * 8);
  std::vector<Array> in2 = {Array::view(x2.data(), {3, 8}, kiln::f32)};
  std::vector<Array> out2 = {Array::view(y2.data(), {3, 8}, kiln::f32)};
  f.call(in2, out2);
  f.call(in, out);
  for (auto _ : state) f.call(in, out);
  state.counters["compiles"] = static_cast<double>(f.stats().compiles);
  if (y[0] != 2.0f) state.SkipWithError("wrong result");
}

void BM_call_exact_variant(benchmark::State& state) { call_tiny(state, kiln::DynamicMode::exact); }
void BM_call_symbolic_variant(benchmark::State& state) {
  call_tiny(state, kiln::DynamicMode::symbolic);
}
BENCHMARK(BM_call_exact_variant)->Arg(4);
BENCHMARK(BM_call_symbolic_variant)->Arg(4);

}  // namespace

BENCHMARK_MAIN();
