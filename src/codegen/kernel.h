// A compiled kernel as the Executable sees it: a function pointer with a fixed ABI and what it
// was built from. Backends own the code; destroying the kernel frees it.
#pragma once

#include "codegen/schedule.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class ThreadPool;

// bufs: one pointer per leaf of the fused group (element 0 of each), then the output buffer.
// strides: runtime strides (in elements) of the leaves whose layout is not known at compile time.
// dims: run-time extents of the symbolic dims, by symbol id (nullptr when every dim is exact).
// [begin, end): the slice of the kernel's parallel extent this call computes.
using KernelFn = void (*)(void* const* bufs, const int64_t* strides, const int64_t* dims,
                          int64_t begin, int64_t end);

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // Runs the kernel over its schedule: by default fn over [0, extent) split across the pool.
  // Kernels that parallelize themselves (the x86 GEMM driver) override it.
  virtual void launch(void* const* bufs, const int64_t* strides, const int64_t* dims,
                      const Schedule& sched, ThreadPool& pool) const;
  KernelFn fn = nullptr;
  std::string name;
  std::string backend;   // "llvm", "x86", "cuda"
  std::string key;       // hex cache key
  std::string manifest;  // readable key fields
  std::string source;    // LLVM IR (optimized) when kept
  std::string asm_text;
  std::vector<std::string> ops;
  size_t code_bytes = 0;
  double compile_ms = 0;
};

}  // namespace kiln
