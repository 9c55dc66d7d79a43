// What fusing more into the x86 GEMM saves, through the JIT (paired rounds, benchmarks/paired.h):
//  - attention scores q @ k^T * scale + mask with the mask broadcast over batch and heads: one
//    x86 kernel with the mask as its fused residual, against the same work as two kernels (the
//    scaled scores stored, then a pass adding the mask: what kiln compiled before the mask could
//    be a broadcast residual), and against the scores alone;
//  - two matmuls reading one transposed weight, (x @ w.T, z @ w.T): both read w in place, against
//    a kernel storing w.T first and both matmuls reading the copy (what kiln compiled before a
//    view read by two kernels joined each of them);
//  - a GEMV written with a vector and its epilogue, relu(W @ v + b): one x86 kernel (W @ v run as
//    v^T @ W^T, the traced reshape to a vector sunk below the epilogue), against the GEMV then a
//    relu(+ b) pass (what kiln compiled before), and W @ v alone as a vector and as a [K, 1]
//    column (the orientation the GEMM ran W @ v in before);
//  - a SwiGLU feed-forward gate, silu(x @ w1) * (x @ w3): two x86 kernels, the second multiplying
//    by the first's output in its epilogue, against both products stored and then a
//    silu(a) * b pass (what kiln compiled before the epilogue could multiply);
//  - LayerScale, r + g * (x @ w + b): one x86 kernel with g as the column scale, against the
//    linear layer then an r + g * y pass (before).
// Outputs are caller-owned (Function::call), so no contender allocates per call. The two-kernel
// contenders need the LLVM backend (their second kernel is elementwise); without it they are left
// out, with a line saying so. Every contender's result is checked against the fused one's.
//
//   OMP_WAIT_POLICY=passive KILN_CACHE=off build-bench/benchmarks/epilogue_bench [--rounds=N]
#include "paired.h"

#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::Array;
using kiln::Tensor;

struct Buffer {
  std::vector<float> data;
  std::vector<int64_t> shape;
  Array view() { return Array::view(data.data(), shape, kiln::f32); }
};

Buffer random_buffer(std::vector<int64_t> shape, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Buffer b{std::vector<float>(size_t(n)), std::move(shape)};
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : b.data) v = u(rng);
  return b;
}

Buffer zero_buffer(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Buffer{std::vector<float>(size_t(n)), std::move(shape)};
}

// Calls f with inputs `in` into outputs `out` (the caller's arrays).
void call(const kiln::Function& f, std::vector<Array> in, std::vector<Array> out) {
  f.call(in, out);
}

double max_abs_diff(const Buffer& a, const Buffer& b) {
  double m = 0;
  for (size_t i = 0; i < a.data.size(); ++i)
    m = std::max(m, std::abs(double(a.data[i]) - double(b.data[i])));
  return m;
}

std::string kernels_of(const kiln::Function& f) {
  std::string s;
  for (const auto& [backend, n] : f.stats().backend_kernels)
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + backend;
  return s;
}

void report(const char* title, const kiln::bench::PairedTimes& t, const std::string& fused) {
  std::printf("\n%s\n", title);
  for (const std::string& name : t.names) {
    const kiln::bench::Spread s = kiln::bench::seconds_of(t, name);
    std::printf("  %-22s %9.1f us (quartiles %.1f-%.1f)", name.c_str(), s.median * 1e6, s.low * 1e6,
                s.high * 1e6);
    if (name != fused) {
      const kiln::bench::Spread r = kiln::bench::paired_speedup(t, fused, {name});
      std::printf("   %s / this: %.2fx (%.2f-%.2f)", fused.c_str(), r.median, r.low, r.high);
    }
    std::printf("\n");
  }
}

// "  kernels: fused <f's kernels>; split <each of split's, in order>" (the split form only where
// it ran: with LLVM).
void print_kernels(const kiln::Function& fused, bool llvm,
                   std::initializer_list<const kiln::Function*> split) {
  std::string s = "  kernels: fused " + kernels_of(fused);
  if (llvm) {
    const char* sep = "; split ";
    for (const kiln::Function* f : split) {
      s += sep + kernels_of(*f);
      sep = ", then ";
    }
  }
  std::printf("%s\n", s.c_str());
}

bool check(const char* what, const Buffer& got, const Buffer& want, double tol) {
  const double d = max_abs_diff(got, want);
  std::printf("  check %-36s max |diff| %.2e %s\n", what, d, d <= tol ? "ok" : "MISMATCH");
  return d <= tol;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::atoi(argv[i] + 9);
    } else {
      std::fprintf(stderr, "usage: epilogue_bench [--rounds=N]\n");
      return 2;
    }
  }
  const bool llvm = !kiln::device_info().llvm_version.empty();
  std::printf("threads: %d; paired rounds: %d, about 50 ms per contender per round\n",
              kiln::device_info().num_threads, rounds);
  if (!llvm) std::printf("kiln was built without LLVM: the two-kernel contenders are left out\n");
  std::mt19937 rng(42);
  bool ok = true;

  {
    // BERT-base attention scores at sequence length 128, batch 8.
    const int64_t B = 8, H = 12, S = 128, D = 64;
    Buffer q = random_buffer({B, H, S, D}, rng), k = random_buffer({B, H, S, D}, rng),
           mask = random_buffer({S, S}, rng);
    Buffer fused_out = zero_buffer({B, H, S, S}), split_out = zero_buffer({B, H, S, S}),
           scores = zero_buffer({B, H, S, S});
    const double scale = 0.125;
    kiln::Function fused = kiln::jit([scale](Tensor q, Tensor k, Tensor m) {
      return kiln::matmul(q, k.transpose({0, 1, 3, 2})) * scale + m;
    });
    kiln::Function scores_only = kiln::jit([scale](Tensor q, Tensor k) {
      return kiln::matmul(q, k.transpose({0, 1, 3, 2})) * scale;
    });
    kiln::Function add_mask = kiln::jit([](Tensor s, Tensor m) { return s + m; });
    std::vector<kiln::bench::Contender> cs;
    cs.push_back({"fused (mask in GEMM)", [&] {
                    call(fused, {q.view(), k.view(), mask.view()}, {fused_out.view()});
                  }});
    cs.push_back({"scores only", [&] {
                    call(scores_only, {q.view(), k.view()}, {scores.view()});
                  }});
    if (llvm)
      cs.push_back({"scores, then + mask", [&] {
                      call(scores_only, {q.view(), k.view()}, {scores.view()});
                      call(add_mask, {scores.view(), mask.view()}, {split_out.view()});
                    }});
    const auto t = kiln::bench::run_paired(cs, rounds, 0.05);
    report("attention scores q @ k^T * 0.125 + mask[128, 128], q, k: [8, 12, 128, 64]", t,
           "fused (mask in GEMM)");
    std::printf("  kernels: fused %s; scores %s%s\n", kernels_of(fused).c_str(),
                kernels_of(scores_only).c_str(),
                llvm ? ("; mask pass " + kernels_of(add_mask)).c_str() : "");
    if (llvm) ok = check("fused against scores + mask", fused_out, split_out, 1e-4) && ok;
  }

  {
    // Two row blocks through one BERT-base feed-forward weight stored [out, in] (x @ w.T).
    const int64_t M = 64, K = 768, N = 3072;
    Buffer x = random_buffer({M, K}, rng), z = random_buffer({M, K}, rng),
           w = random_buffer({N, K}, rng);
    Buffer y1 = zero_buffer({M, N}), y2 = zero_buffer({M, N}), c1 = zero_buffer({M, N}),
           c2 = zero_buffer({M, N}), wt = zero_buffer({K, N});
    kiln::Function in_place = kiln::jit([](Tensor x, Tensor z, Tensor w) {
      Tensor t = w.transpose();
      return std::vector<Tensor>{kiln::matmul(x, t), kiln::matmul(z, t)};
    });
    kiln::Function transpose = kiln::jit([](Tensor w) { return w.transpose(); });
    kiln::Function from_copy = kiln::jit([](Tensor x, Tensor z, Tensor t) {
      return std::vector<Tensor>{kiln::matmul(x, t), kiln::matmul(z, t)};
    });
    std::vector<kiln::bench::Contender> cs;
    cs.push_back({"w read in place", [&] {
                    call(in_place, {x.view(), z.view(), w.view()}, {y1.view(), y2.view()});
                  }});
    if (llvm)
      cs.push_back({"w.T stored, then read", [&] {
                      call(transpose, {w.view()}, {wt.view()});
                      call(from_copy, {x.view(), z.view(), wt.view()}, {c1.view(), c2.view()});
                    }});
    const auto t = kiln::bench::run_paired(cs, rounds, 0.05);
    report("(x @ w.T, z @ w.T), x, z: [64, 768], w: [3072, 768]", t, "w read in place");
    std::printf(
        "  kernels: in place %s%s\n", kernels_of(in_place).c_str(),
        llvm ? ("; copy " + kernels_of(transpose) + ", then " + kernels_of(from_copy)).c_str()
             : "");
    if (llvm) {
      ok = check("x @ w.T in place against from the copy", y1, c1, 1e-4) && ok;
      ok = check("z @ w.T in place against from the copy", y2, c2, 1e-4) && ok;
    }
  }
  for (auto [M, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {1024, 1024}, {256, 256}}) {
    Buffer w = random_buffer({M, K}, rng), v = random_buffer({K}, rng), b = random_buffer({M}, rng);
    Buffer fused_out = zero_buffer({M}), split_out = zero_buffer({M}), y = zero_buffer({M}),
           col = zero_buffer({M, 1});
    Buffer v_col{v.data, {K, 1}};
    kiln::Function fused =
        kiln::jit([](Tensor w, Tensor v, Tensor b) { return kiln::relu(kiln::matmul(w, v) + b); });
    kiln::Function gemv = kiln::jit([](Tensor w, Tensor v) { return kiln::matmul(w, v); });
    kiln::Function gemv_col = kiln::jit([](Tensor w, Tensor v) { return kiln::matmul(w, v); });
    kiln::Function epilogue = kiln::jit([](Tensor y, Tensor b) { return kiln::relu(y + b); });
    std::vector<kiln::bench::Contender> cs;
    cs.push_back({"relu(W @ v + b) fused", [&] {
                    call(fused, {w.view(), v.view(), b.view()}, {fused_out.view()});
                  }});
    if (llvm)
      cs.push_back({"W @ v, then relu(+ b)", [&] {
                      call(gemv, {w.view(), v.view()}, {y.view()});
                      call(epilogue, {y.view(), b.view()}, {split_out.view()});
                    }});
    cs.push_back({"W @ v alone", [&] { call(gemv, {w.view(), v.view()}, {y.view()}); }});
    cs.push_back({"W @ v[K, 1] alone", [&] {
                    call(gemv_col, {w.view(), v_col.view()}, {col.view()});
                  }});
    const auto t = kiln::bench::run_paired(cs, rounds, 0.05);
    const std::string title =
        "relu(W @ v + b), W: [" + std::to_string(M) + ", " + std::to_string(K) + "]";
    report(title.c_str(), t, "relu(W @ v + b) fused");
    print_kernels(fused, llvm, {&gemv, &epilogue});
    ok = check("W @ v against W @ v[K, 1]", y, Buffer{col.data, {M}}, 1e-4) && ok;
    if (llvm) ok = check("fused against the two kernels", fused_out, split_out, 1e-4) && ok;
  }
  for (int64_t M : {128, 16}) {
    // A LLaMA-style gate at a quarter of LLaMA-7B's widths: x [M, 1024], w1, w3 [1024, 2816].
    const int64_t K = 1024, N = 2816;
    Buffer x = random_buffer({M, K}, rng), w1 = random_buffer({K, N}, rng),
           w3 = random_buffer({K, N}, rng);
    Buffer fused_out = zero_buffer({M, N}), split_out = zero_buffer({M, N}),
           g = zero_buffer({M, N}), u = zero_buffer({M, N});
    kiln::Function fused = kiln::jit([](Tensor x, Tensor w1, Tensor w3) {
      return kiln::silu(kiln::matmul(x, w1)) * kiln::matmul(x, w3);
    });
    kiln::Function product = kiln::jit([](Tensor x, Tensor w) { return kiln::matmul(x, w); });
    kiln::Function gate = kiln::jit([](Tensor g, Tensor u) { return kiln::silu(g) * u; });
    std::vector<kiln::bench::Contender> cs;
    cs.push_back({"gate in the epilogue", [&] {
                    call(fused, {x.view(), w1.view(), w3.view()}, {fused_out.view()});
                  }});
    if (llvm)
      cs.push_back({"products, then a pass", [&] {
                      call(product, {x.view(), w1.view()}, {g.view()});
                      call(product, {x.view(), w3.view()}, {u.view()});
                      call(gate, {g.view(), u.view()}, {split_out.view()});
                    }});
    const auto t = kiln::bench::run_paired(cs, rounds, 0.05);
    const std::string title =
        "silu(x @ w1) * (x @ w3), x: [" + std::to_string(M) + ", 1024], w1, w3: [1024, 2816]";
    report(title.c_str(), t, "gate in the epilogue");
    print_kernels(fused, llvm, {&product, &gate});
    if (llvm) ok = check("fused against the three kernels", fused_out, split_out, 1e-3) && ok;
  }
  {
    // A ViT-B block's second MLP layer with LayerScale: x [197, 3072], w [3072, 768].
    const int64_t M = 197, K = 3072, N = 768;
    Buffer x = random_buffer({M, K}, rng), w = random_buffer({K, N}, rng),
           b = random_buffer({N}, rng), g = random_buffer({N}, rng), r = random_buffer({M, N}, rng);
    Buffer fused_out = zero_buffer({M, N}), split_out = zero_buffer({M, N}),
           y = zero_buffer({M, N});
    kiln::Function fused = kiln::jit([](Tensor x, Tensor w, Tensor b, Tensor g, Tensor r) {
      return r + g * (kiln::matmul(x, w) + b);
    });
    kiln::Function linear =
        kiln::jit([](Tensor x, Tensor w, Tensor b) { return kiln::matmul(x, w) + b; });
    kiln::Function scale = kiln::jit([](Tensor y, Tensor g, Tensor r) { return r + g * y; });
    std::vector<kiln::bench::Contender> cs;
    cs.push_back(
        {"column scale in the GEMM", [&] {
           call(fused, {x.view(), w.view(), b.view(), g.view(), r.view()}, {fused_out.view()});
         }});
    if (llvm)
      cs.push_back({"linear, then a pass", [&] {
                      call(linear, {x.view(), w.view(), b.view()}, {y.view()});
                      call(scale, {y.view(), g.view(), r.view()}, {split_out.view()});
                    }});
    const auto t = kiln::bench::run_paired(cs, rounds, 0.05);
    report("r + g * (x @ w + b), x: [197, 3072], w: [3072, 768]", t, "column scale in the GEMM");
    print_kernels(fused, llvm, {&linear, &scale});
    if (llvm) ok = check("fused against the two kernels", fused_out, split_out, 1e-3) && ok;
  }
  std::printf("\nresult checks: %s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
