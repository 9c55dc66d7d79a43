// An Executable: what one variant of a Function runs. A buffer plan (inputs, constants, temps
// in one per-thread arena, outputs) and the ordered kernel launches, each split over the pool.
// A symbolic variant's output shapes, temp sizes and schedules are products of dims evaluated
// per call from the symbols' extents (`dims`, bound by the variant's guards).
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
  ScheduleSpec spec;
  Schedule sched;  // spec evaluated once when it has no symbolic dims
};

struct OutputSpec {
  ir::Shape shape;  // may hold symbols
  DType dtype = DType::f32;
  int alias_of = -1;  // the same value as an earlier output: copied after the run
};

struct Executable {
  std::vector<Launch> launches;
  std::vector<std::shared_ptr<const ir::ConstantData>> constants;
  std::vector<int64_t> temp_offsets;  // into the arena, 64-byte aligned (when !symbolic)
  int64_t temp_bytes = 0;
  std::vector<ir::Shape> temp_shapes;  // per temp, and the bytes of one element
  std::vector<int64_t> temp_elem_bytes;
  bool symbolic = false;  // some shape depends on the symbols' extents
  std::vector<OutputSpec> outputs;
  std::string graph_text;  // after passes
  std::vector<KernelInfo> kernel_infos;

  // inputs match the variant this was compiled for, `dims` holds its symbols' extents (nullptr
  // when it has none); outputs have the specs' shapes/dtypes and are contiguous.
  void run(std::span<const Array> inputs, std::span<Array> outputs, ThreadPool& pool,
           const int64_t* dims = nullptr) const;
  std::vector<int64_t> output_shape(size_t i, const int64_t* dims) const;
};

}  // namespace kiln
