// An Executable: what one signature of a Function runs. A buffer plan (inputs, constants, temps
// in one per-thread arena, outputs) and the ordered kernel launches, each split over the pool.
#pragma once

#include "codegen/kernel.h"
#include "codegen/schedule.h"
#include "ir/node.h"
#include "jit/thread_pool.h"

#include <kiln/array.h>
#include <kiln/function.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

struct BufferSlot {
  enum class Kind : uint8_t { input, constant, temp, output };
  Kind kind = Kind::temp;
  int index = 0;  // argument, constant, temp or output number
};

struct Launch {
  std::shared_ptr<CompiledKernel> kernel;
  std::vector<BufferSlot> slots;         // one per leaf, then the output
  std::vector<int> runtime_stride_args;  // inputs whose strides the kernel reads, in order
  Schedule sched;
};

struct OutputSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  int alias_of = -1;  // the same value as an earlier output: copied after the run
};

struct Executable {
  std::vector<Launch> launches;
  std::vector<std::shared_ptr<const ir::ConstantData>> constants;
  std::vector<int64_t> temp_offsets;  // into the arena, 64-byte aligned
  int64_t temp_bytes = 0;
  std::vector<OutputSpec> outputs;
  std::string graph_text;  // after passes
  std::vector<KernelInfo> kernel_infos;

  // inputs match the signature this was compiled for; outputs have the specs' shapes/dtypes
  // and are contiguous.
  void run(std::span<const Array> inputs, std::span<Array> outputs, ThreadPool& pool) const;
};

}  // namespace kiln
