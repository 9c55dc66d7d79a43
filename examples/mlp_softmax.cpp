// kiln's demo: a small MLP (Linear + bias + GELU, Linear + bias) and a softmax head, traced through
// the C++ API and run at three batch sizes. Each result is checked against plain C++ loops; the
// time per call and the function's cache statistics are printed.
#include <kiln/kiln.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr int64_t kIn = 256, kHidden = 512, kOut = 10;

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The same model in plain loops (double accumulation): the reference the demo checks against.
std::vector<double> reference(const std::vector<float>& x, int64_t batch,
                              const std::vector<float>& w1, const std::vector<float>& b1,
                              const std::vector<float>& w2, const std::vector<float>& b2) {
  std::vector<double> out(batch * kOut);
  std::vector<double> h(kHidden);
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t j = 0; j < kHidden; ++j) {
      double acc = b1[j];
      for (int64_t k = 0; k < kIn; ++k) acc += double(x[r * kIn + k]) * w1[k * kHidden + j];
      h[j] = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
    }
    double mx = -INFINITY;
    std::vector<double> logits(kOut);
    for (int64_t j = 0; j < kOut; ++j) {
      double acc = b2[j];
      for (int64_t k = 0; k < kHidden; ++k) acc += h[k] * w2[k * kOut + j];
      logits[j] = acc;
      mx = std::max(mx, acc);
    }
    double sum = 0;
    for (int64_t j = 0; j < kOut; ++j) sum += std::exp(logits[j] - mx);
    for (int64_t j = 0; j < kOut; ++j) out[r * kOut + j] = std::exp(logits[j] - mx) / sum;
  }
  return out;
}

}  // namespace

int main() {
  std::mt19937 rng(42);
  auto w1 = random_vector(kIn * kHidden, rng, 0.08f);
  auto b1 = random_vector(kHidden, rng, 0.1f);
  auto w2 = random_vector(kHidden * kOut, rng, 0.08f);
  auto b2 = random_vector(kOut, rng, 0.1f);

  kiln::Function model = kiln::jit(
      [](kiln::Tensor x, kiln::Tensor w1, kiln::Tensor b1, kiln::Tensor w2, kiln::Tensor b2) {
        kiln::Tensor h = kiln::gelu(kiln::matmul(x, w1) + b1);
        return kiln::softmax(kiln::matmul(h, w2) + b2, -1);
      });

  std::printf("kiln demo: MLP %lld -> %lld (GELU) -> %lld, softmax head\n", (long long)kIn,
              (long long)kHidden, (long long)kOut);
  bool all_ok = true;
  for (int64_t batch : {1, 37, 256}) {
    auto x = random_vector(batch * kIn, rng, 1.0f);
    std::vector<kiln::Array> args = {kiln::Array::view(x.data(), {batch, kIn}, kiln::f32),
                                     kiln::Array::view(w1.data(), {kIn, kHidden}, kiln::f32),
                                     kiln::Array::view(b1.data(), {kHidden}, kiln::f32),
                                     kiln::Array::view(w2.data(), {kHidden, kOut}, kiln::f32),
                                     kiln::Array::view(b2.data(), {kOut}, kiln::f32)};
    auto t0 = std::chrono::steady_clock::now();
    std::vector<kiln::Array> out = model(args);  // first call: trace + compile + run
    auto t1 = std::chrono::steady_clock::now();
    int reps = 0;
    auto t2 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count() < 0.2) {
      out = model(args);
      ++reps;
    }
    double per_call_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t2).count() /
        reps;
    auto want = reference(x, batch, w1, b1, w2, b2);
    double max_err = 0;
    const float* got = out[0].data<float>();
    for (size_t i = 0; i < want.size(); ++i)
      max_err = std::max(max_err, std::abs(got[i] - want[i]));
    bool ok = max_err < 1e-5;
    all_ok = all_ok && ok;
    std::printf(
        "batch %4lld: first call %8.2f ms, then %9.2f us/call, max |error| vs reference %.2e %s\n",
        (long long)batch, std::chrono::duration<double, std::milli>(t1 - t0).count(), per_call_us,
        max_err, ok ? "ok" : "MISMATCH");
  }
  kiln::Stats s = model.stats();
  std::printf("stats: calls=%lld compiles=%lld variants=%lld memory_hits=%lld disk_hits=%lld\n",
              (long long)s.calls, (long long)s.compiles, (long long)s.variants,
              (long long)s.memory_hits, (long long)s.disk_hits);
  for (const auto& [backend, n] : s.backend_kernels)
    std::printf("kernels on %s: %lld\n", backend.c_str(), (long long)n);
  for (const auto& r : s.recompile_reasons) std::printf("compiled because: %s\n", r.c_str());
  return all_ok ? 0 : 1;
}
