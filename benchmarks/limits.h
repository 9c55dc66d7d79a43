// Physical limits measured in the same run as a benchmark (BENCHMARKING.md): the FMA peak of a
// loop of independent vfmadd231ps on N pinned threads, and the STREAM triad bandwidth on N
// pinned threads. Shared by every benchmark that quotes a ratio to a limit.
// This directory is on the include path of every benchmark, so this file also answers
// `#include <limits.h>` from the standard library: always pass that on to the system header (no
// #pragma once, which would hide it on a second inclusion); only kiln's part is guarded.
#include_next <limits.h>

#if defined(__cplusplus) && !defined(KILN_BENCHMARKS_LIMITS_H_)
#define KILN_BENCHMARKS_LIMITS_H_
#include <cstddef>
#include <string>

namespace kiln::bench {

// Restricts the whole process (and every thread it starts later) to CPUs [0, threads).
// Returns a line saying what was done, for the benchmark header.
std::string pin_process(int threads);
// Pins the calling thread to one CPU.
void pin_this_thread(int cpu);

// GFLOP/s of independent vfmadd231ps (zmm when the CPU has AVX-512F, else ymm) on `threads`
// pinned threads; best of a few trials of about `seconds` each.
double fma_peak_gflops(int threads, double seconds = 0.2);

// STREAM triad a[i] = b[i] + s * c[i] on doubles, `threads` pinned threads each first-touching its
// slice; bytes counted as 24 per element (STREAM's convention). Best of a few passes.
double stream_triad_gbs(int threads, size_t elements_per_array = size_t(1) << 23);

// One slice of a float32 STREAM triad, a[i] = b[i] + s * c[i], vectorized and kept out of line
// so every caller times the same loop: the paired triad contenders of gemm_bench and
// fusion_bench, which run it on their own thread teams.
void triad_f32(float* a, const float* b, const float* c, float s, std::ptrdiff_t n);

// "model name" with family, model and stepping, the ISA flags that matter here and the caches
// kiln detected, for the header line.
std::string machine_line();

}  // namespace kiln::bench
#endif  // __cplusplus
