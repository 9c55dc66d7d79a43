// Where the time of a small GEMM call goes, 1 thread, paired rounds (paired.h): LIBXSMM's
// dispatched kernel, kiln's generated direct kernel called alone (KernelArgs built once), the same
// with KernelArgs built per call, GemmPlan::run (what the JIT's x86 launch calls), x86::gemm
// (plus the plan-table lookup) and the JIT's f.call (dispatch + launch). Ratios to LIBXSMM.
// "fma bound" (AVX-512 only) is the floor any kernel of this shape meets: as many 16-lane FMAs as
// the direct kernel issues (M x ceil(N/16) x K, rounded down to a multiple of 16), all on
// registers in 16 independent chains, then 16 stores: no loads, no edges, no epilogue.
//   build-bench/benchmarks/gemm_call_overhead_bench [--rounds=21]
#include "codegen/x86/gemm.h"
#include "codegen/x86/kernel_registry.h"
#include "jit/thread_pool.h"
#include "limits.h"
#include "paired.h"

#include <kiln/kiln.h>
#include <libxsmm.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// fma_bound_zmm(blocks, out): `blocks` rounds of 16 vfmadd231ps (one per accumulator zmm0-15,
// sources zmm16 and zmm17), then the accumulators stored to out[0..256).
extern "C" void fma_bound_zmm(int64_t blocks, float* out);
asm(R"(
  .text
  .globl fma_bound_zmm
  .type fma_bound_zmm, @function
  .p2align 6
fma_bound_zmm:
  .irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vpxord %zmm\r, %zmm\r, %zmm\r
  .endr
  test %rdi, %rdi
  jz 2f
  .p2align 5
1:
  .irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vfmadd231ps %zmm17, %zmm16, %zmm\r
  .endr
  dec %rdi
  jnz 1b
2:
  .irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vmovups %zmm\r, \r*64(%rsi)
  .endr
  vzeroupper
  ret
  .size fma_bound_zmm, .-fma_bound_zmm
)");

namespace {

namespace x86 = kiln::x86;
namespace bench = kiln::bench;
constexpr int kCallsPerRun = 100;

void measure(int64_t M, int64_t N, int64_t K, int rounds) {
  std::vector<float> a(size_t(M * K)), b(size_t(K * N)), c(size_t(M * N));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) * 0.5f;
  kiln::ThreadPool pool(1);
  x86::GemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.a = {a.data(), K, 1};
  p.b = {b.data(), N, 1};
  p.c = c.data();
  p.ldc = N;
  auto plan = x86::GemmPlan::make(p, x86::selected_isa(), 1);
  // The direct kernel the plan runs (small shapes: one fully specialized kernel).
  x86::KernelDesc d;
  d.kind = x86::KernelKind::direct;
  d.isa = int64_t(x86::selected_isa());
  d.rows = M, d.cols = N, d.K = K;
  d.a_rs = K, d.a_cs = 1, d.b_rs = N, d.ldc = N;
  const x86::Kernel* k = &x86::get_kernel(d);
  const auto used = plan->kernels();
  if (used.size() != 1 || used[0].name != k->info.name) {
    std::printf("%ldx%ldx%ld: the plan does not run %s alone; not measured\n", long(M), long(N),
                long(K), k->info.name.c_str());
    std::exit(1);
  }
  const libxsmm_blasint m = N, n = M, kk = K, lda = m, ldb = kk, ldc = m;
  const float alpha = 1, beta = 0;
  libxsmm_smmfunction xk =
      libxsmm_smmdispatch(m, n, kk, &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
  if (!xk) {
    std::printf("LIBXSMM has no kernel for %ldx%ldx%ld\n", long(M), long(N), long(K));
    return;
  }
  kiln::Function f = kiln::jit([](kiln::Tensor x, kiln::Tensor y) { return kiln::matmul(x, y); });
  std::vector<kiln::Array> io = {kiln::Array::view(a.data(), {M, K}, kiln::f32),
                                 kiln::Array::view(b.data(), {K, N}, kiln::f32),
                                 kiln::Array::view(c.data(), {M, N}, kiln::f32)};
  float *A = a.data(), *B = b.data(), *C = c.data();
  std::vector<bench::Contender> cs = {
      {"libxsmm",
       [=] {
         for (int i = 0; i < kCallsPerRun; ++i) xk(B, A, C);
       }},
      {"kernel",
       [=] {
         const x86::KernelArgs args{nullptr, nullptr, K, 0, 0, 1.0f};
         for (int i = 0; i < kCallsPerRun; ++i) k->fn(&args, A, B, C);
       }},
      {"kernel+args",
       [=] {
         for (int i = 0; i < kCallsPerRun; ++i) {
           const x86::KernelArgs args{nullptr, nullptr, K, 0, 0, 1.0f};
           k->fn(&args, A, B, C);
           asm volatile("" ::: "memory");
         }
       }},
      {"plan->run",
       [&] {
         for (int i = 0; i < kCallsPerRun; ++i) plan->run(p, pool);
       }},
      {"x86::gemm",
       [&] {
         for (int i = 0; i < kCallsPerRun; ++i) x86::gemm(p, pool);
       }},
      {"jit f.call",
       [&] {
         for (int i = 0; i < kCallsPerRun; ++i)
           f.call(std::span<const kiln::Array>(io.data(), 2),
                  std::span<kiln::Array>(io.data() + 2, 1));
       }},
  };
  const int64_t fma_blocks = M * ((N + 15) / 16) * K / 16;
  std::vector<float> sink(256);
  if (x86::selected_isa() == x86::Isa::avx512) {
    cs.push_back({"fma bound", [&] {
                    for (int i = 0; i < kCallsPerRun; ++i) fma_bound_zmm(fma_blocks, sink.data());
                  }});
  }
  const bench::PairedTimes t = bench::run_paired(cs, rounds, 0.02);
  std::printf("%ldx%ldx%ld (fma bound: %ld FMAs a call):\n", long(M), long(N), long(K),
              long(16 * fma_blocks));
  for (const auto& name : t.names) {
    const bench::Spread s = bench::seconds_of(t, name);
    const bench::Spread r = bench::paired_speedup(t, name, {"libxsmm"});
    std::printf("  %-12s %8.1f ns/call  %6.1f GFLOP/s  %.2fx LIBXSMM (%.2f-%.2f)\n", name.c_str(),
                s.median / kCallsPerRun * 1e9,
                2.0 * double(M * N * K) * kCallsPerRun / s.median * 1e-9, r.median, r.low, r.high);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--rounds=", 0) == 0) rounds = std::atoi(argv[i] + 9);
  std::printf("machine: %s; %s\n", bench::machine_line().c_str(), bench::pin_process(1).c_str());
  std::printf("kiln x86 ISA: %s\n", x86::isa_name().c_str());
  libxsmm_init();
  measure(16, 16, 16, rounds);
  measure(23, 57, 91, rounds);
  measure(32, 32, 32, rounds);
  measure(64, 64, 64, rounds);
  return 0;
}
