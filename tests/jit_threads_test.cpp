// Concurrency tests of kiln::Function (CONVENTIONS tier 5): many threads on a cold cache compile
// once (single flight), a compile/trace error reaches every waiter and is not cached, different
// functions and signatures in parallel, and f.call into caller-owned outputs from many threads.
#include "jit_test_util.h"
#include "needs_llvm.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace jt;
using kiln::Tensor;

namespace {

// Starts `n` threads that wait on one flag and then run body(i); joins them.
template <typename F>
void run_together(int n, F body) {
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      body(i);
    });
  while (ready.load() < n) std::this_thread::yield();
  go = true;
  for (auto& t : ts) t.join();
}

// Catch assertions are not thread-safe: threads record results, the main thread asserts.
struct Outcome {
  std::vector<Array> outs;
  std::string error;
  bool shape_error = false;
};

}  // namespace

TEST_CASE("jit threads: 16 threads call one function with a cold cache: one compile, all correct",
          "[jit][threads]" KILN_NEEDS_LLVM) {
  Rng rng(100);
  std::atomic<int> traces{0};
  auto fn = [&traces](Tensor x, Tensor w, Tensor b) {
    ++traces;
    // Slow the trace down a little so the callers really overlap the compile.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return kiln::softmax(kiln::matmul(kiln::gelu(x), w) + b);
  };
  TestArray x = make_array(rng, {33, 17}, DType::f32, Layout::strided);
  TestArray w = make_array(rng, {17, 9}, DType::f32);
  TestArray b = make_array(rng, {9}, DType::f32);
  const std::vector<Array> in = {x.array, w.array, b.array};
  kiln::Function f = kiln::jit(fn);
  std::vector<Outcome> res(16);
  run_together(16, [&](int i) {
    try {
      res[i].outs = f(in);
    } catch (const std::exception& e) {
      res[i].error = e.what();
    }
  });
  auto want = reference(trace_graph(fn, in), in);
  for (int i = 0; i < 16; ++i) {
    INFO("thread " << i);
    REQUIRE(res[i].error == "");
    REQUIRE(res[i].outs.size() == 1);
    assert_close(res[i].outs[0], want[0], 17.0, "thread " + std::to_string(i));
  }
  kiln::Stats st = f.stats();
  CHECK(st.compiles == 1);
  CHECK(st.calls == 16);
  CHECK(st.variants == 1);
  CHECK(traces.load() == 2);  // one for the compile, one for the reference above
}

TEST_CASE("jit threads: a compile error reaches every concurrent waiter and is not cached",
          "[jit][threads]" KILN_NEEDS_LLVM) {
  Rng rng(101);
  std::atomic<int> traces{0};
  auto fn = [&traces](Tensor a, Tensor b) {
    ++traces;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return a + b;  // [4,6] + [5]: a ShapeError
  };
  kiln::Function f = kiln::jit(fn);
  TestArray a = make_array(rng, {4, 6}, DType::f32);
  TestArray bad = make_array(rng, {5}, DType::f32);
  TestArray good = make_array(rng, {6}, DType::f32);
  std::vector<Outcome> res(16);
  run_together(16, [&](int i) {
    try {
      res[i].outs = f({a.array, bad.array});
    } catch (const kiln::ShapeError& e) {
      res[i].shape_error = true;
      res[i].error = e.what();
    } catch (const std::exception& e) {
      res[i].error = std::string("wrong type: ") + e.what();
    }
  });
  for (int i = 0; i < 16; ++i) {
    INFO("thread " << i << ": " << res[i].error);
    CHECK(res[i].shape_error);
    CHECK_THAT(res[i].error,
               Catch::Matchers::Contains("[4,6]") && Catch::Matchers::Contains("[5]"));
  }
  // Single flight for errors too: far fewer traces than callers (callers arriving after the
  // failure may trace again, since errors are not cached).
  CHECK(traces.load() < 16);
  CHECK(f.stats().compiles == 0);
  // Not cached: the next call traces again and throws again; a good signature still compiles.
  int before = traces.load();
  CHECK_THROWS_AS(f({a.array, bad.array}), kiln::ShapeError);
  CHECK(traces.load() == before + 1);
  check_against_reference(fn, {a, good},
                          {.label = "good call after concurrent errors", .function = &f});
  CHECK(f.stats().compiles == 1);
}

TEST_CASE("jit threads: many threads calling different functions and signatures",
          "[jit][threads]" KILN_NEEDS_LLVM) {
  // 4 functions x 3 shapes; 16 threads each call every (function, shape) pair in their own order.
  std::vector<std::function<Tensor(Tensor)>> bodies = {
      [](Tensor x) { return kiln::tanh(x) * 2.0 + 1.0; },
      [](Tensor x) { return x.sum(-1, true) - x; },
      [](Tensor x) { return kiln::layer_norm(x); },
      [](Tensor x) { return kiln::matmul(x, x.T()); },
  };
  std::vector<kiln::Function> fs;
  // Exact shapes: each signature is compiled exactly once however the threads interleave (with
  // dynamic="auto" the count would depend on which shape comes first).
  kiln::Options exact;
  exact.dynamic = kiln::DynamicMode::exact;
  for (auto& b : bodies) fs.push_back(kiln::jit([b](Tensor x) { return b(x); }, exact));
  Rng rng(102);
  std::vector<TestArray> ins = {make_array(rng, {7, 9}, DType::f32),
                                make_array(rng, {33, 17}, DType::f32),
                                make_array(rng, {1, 130}, DType::f32, Layout::offset)};
  // Expected results.
  std::vector<std::vector<HostTensor>> want(fs.size());
  for (size_t fi = 0; fi < fs.size(); ++fi)
    for (const auto& in : ins) {
      auto b = bodies[fi];
      auto l = [b](Tensor x) { return b(x); };
      want[fi].push_back(reference(trace_graph(l, {in.array}), {in.array})[0]);
    }
  constexpr int kThreads = 16, kRounds = 5;
  std::vector<std::vector<Outcome>> res(kThreads,
                                        std::vector<Outcome>(fs.size() * ins.size() * kRounds));
  run_together(kThreads, [&](int t) {
    std::mt19937_64 order(static_cast<uint64_t>(t));
    std::vector<size_t> jobs(fs.size() * ins.size());
    std::iota(jobs.begin(), jobs.end(), size_t{0});
    for (int r = 0; r < kRounds; ++r) {
      std::shuffle(jobs.begin(), jobs.end(), order);
      for (size_t j : jobs) {
        Outcome& o = res[t][r * jobs.size() + j];
        try {
          o.outs = fs[j / ins.size()]({ins[j % ins.size()].array});
        } catch (const std::exception& e) {
          o.error = e.what();
        }
      }
    }
  });
  for (int t = 0; t < kThreads; ++t)
    for (size_t k = 0; k < res[t].size(); ++k) {
      size_t j = k % (fs.size() * ins.size());
      const Outcome& o = res[t][k];
      INFO("thread " << t << " function " << j / ins.size() << " input " << j % ins.size());
      REQUIRE(o.error == "");
      REQUIRE(o.outs.size() == 1);
      if (!assert_close(o.outs[0], want[j / ins.size()][j % ins.size()], 130.0)) return;
    }
  for (size_t fi = 0; fi < fs.size(); ++fi) {
    INFO("function " << fi);
    CHECK(fs[fi].stats().compiles == static_cast<int64_t>(ins.size()));
    CHECK(fs[fi].stats().calls == kThreads * kRounds * static_cast<int64_t>(ins.size()));
  }
}

TEST_CASE("jit threads: f.call into caller-owned outputs from many threads",
          "[jit][threads]" KILN_NEEDS_LLVM) {
  Rng rng(103);
  auto fn = [](Tensor x, Tensor y) {
    return std::vector<Tensor>{kiln::exp(x) * y, (x * y).sum(0)};
  };
  kiln::Function f = kiln::jit(fn);
  constexpr int kThreads = 16;
  std::vector<TestArray> xs, ys;
  for (int i = 0; i < kThreads; ++i) {
    // Every thread its own data (same signature), so a mixed-up buffer shows.
    xs.push_back(make_array(rng, {65, 33}, DType::f32));
    ys.push_back(make_array(rng, {65, 33}, DType::f32));
  }
  std::vector<std::vector<Array>> outs(kThreads);
  for (auto& o : outs) o = {Array::empty({65, 33}, DType::f32), Array::empty({33}, DType::f32)};
  std::vector<std::string> errors(kThreads);
  run_together(kThreads, [&](int i) {
    try {
      std::vector<Array> in = {xs[i].array, ys[i].array};
      for (int r = 0; r < 20; ++r) f.call(in, outs[i]);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  });
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    REQUIRE(errors[i] == "");
    std::vector<Array> in = {xs[i].array, ys[i].array};
    auto want = reference(trace_graph(fn, in), in);
    assert_close(outs[i][0], want[0], 1.0, "thread " + std::to_string(i) + " output 0");
    assert_close(outs[i][1], want[1], 65.0, "thread " + std::to_string(i) + " output 1");
  }
  CHECK(f.stats().compiles == 1);
  CHECK(f.stats().calls == kThreads * 20);
}

TEST_CASE("jit threads: a copied Function shares its cache across threads",
          "[jit][threads]" KILN_NEEDS_LLVM) {
  Rng rng(104);
  auto fn = [](Tensor x) { return kiln::rms_norm(x); };
  kiln::Function f = kiln::jit(fn);
  TestArray x = make_array(rng, {17, 33}, DType::f32);
  std::vector<Outcome> res(8);
  run_together(8, [&](int i) {
    kiln::Function copy = f;  // NOLINT: copies share state by design
    try {
      res[i].outs = copy({x.array});
    } catch (const std::exception& e) {
      res[i].error = e.what();
    }
  });
  auto want = reference(trace_graph(fn, {x.array}), {x.array});
  for (int i = 0; i < 8; ++i) {
    REQUIRE(res[i].error == "");
    assert_close(res[i].outs[0], want[0], 6.0);
  }
  CHECK(f.stats().compiles == 1);
  CHECK(f.stats().calls == 8);
}

TEST_CASE("jit threads: many threads call one dynamic function with many token counts",
          "[jit][threads]" KILN_NEEDS_LLVM) {
  // 8 threads call a dynamic="auto" function with token counts drawn from 1..64 in their own
  // orders while its variants are being decided: every result is right, and the policy settles on
  // a handful of variants (exact first calls, racing threads, the symbolic one, T = 1).
  auto body = [](Tensor x, Tensor w) { return kiln::softmax(kiln::matmul(x, w) * 0.25, -1); };
  kiln::Function f = kiln::jit(body);
  Rng rng(404);
  TestArray w = make_array(rng, {16, 24}, DType::f32);
  std::vector<TestArray> xs;
  std::vector<HostTensor> want;
  for (int64_t t = 1; t <= 64; ++t) {
    xs.push_back(make_array(rng, {t, 16}, DType::f32));
    want.push_back(
        reference(trace_graph(body, {xs.back().array, w.array}), {xs.back().array, w.array})[0]);
  }
  constexpr int kThreads = 8, kCalls = 40;
  std::vector<std::vector<std::pair<size_t, Outcome>>> res(kThreads);
  run_together(kThreads, [&](int t) {
    std::mt19937_64 order(static_cast<uint64_t>(t) + 7);
    for (int c = 0; c < kCalls; ++c) {
      size_t i = order() % xs.size();
      Outcome o;
      try {
        o.outs = f({xs[i].array, w.array});
      } catch (const std::exception& e) {
        o.error = e.what();
      }
      res[t].emplace_back(i, std::move(o));
    }
  });
  for (int t = 0; t < kThreads; ++t)
    for (const auto& [i, o] : res[t]) {
      INFO("thread " << t << " T=" << i + 1);
      REQUIRE(o.error == "");
      REQUIRE(o.outs.size() == 1);
      if (!assert_close(o.outs[0], want[i], 16.0)) return;
    }
  auto st = f.stats();
  CHECK(st.calls == kThreads * kCalls);
  CHECK(st.compiles == st.variants);
  // Before the first call publishes its variant, the other threads' first calls may each compile
  // an exact variant; after that one symbolic variant serves every T >= 2.
  CHECK(st.compiles <= kThreads + 2);
}
