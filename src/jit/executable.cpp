#include "jit/executable.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln {

namespace {

// Per-thread scratch for temps: grows to the largest plan seen, then calls allocate nothing.
struct Arena {
  void* data = nullptr;
  size_t size = 0;
  ~Arena() { std::free(data); }
  void* get(size_t bytes) {
    if (bytes > size) {
      std::free(data);
      size = (bytes + 63) / 64 * 64;
      data = std::aligned_alloc(64, size);
      if (!data) {
        size = 0;
        throw std::bad_alloc();
      }
    }
    return data;
  }
};

}  // namespace

std::vector<int64_t> Executable::output_shape(size_t i, const int64_t* dims) const {
  return ir::resolve_dims(outputs[i].shape, dims);
}

void Executable::run(std::span<const Array> inputs, std::span<Array> outs, ThreadPool& pool,
                     const int64_t* dims) const {
  thread_local Arena arena;
  thread_local std::vector<void*> ptrs;
  thread_local std::vector<int64_t> strides;
  thread_local std::vector<int64_t> offsets;
  const std::vector<int64_t>* offs = &temp_offsets;
  int64_t bytes_needed = temp_bytes;
  if (symbolic) {
    offsets.resize(temp_shapes.size());
    bytes_needed = 0;
    for (size_t t = 0; t < temp_shapes.size(); ++t) {
      offsets[t] = bytes_needed;
      int64_t bytes = ir::numel(temp_shapes[t], dims) * temp_elem_bytes[t];
      bytes_needed += (bytes + 63) / 64 * 64;
    }
    offs = &offsets;
  }
  char* temps = bytes_needed ? static_cast<char*>(arena.get(bytes_needed)) : nullptr;
  for (const Launch& l : launches) {
    const Schedule sched = l.spec.symbolic ? l.spec.eval(dims) : l.sched;
    if (sched.extent == 0) continue;
    ptrs.resize(l.slots.size());
    for (size_t i = 0; i < l.slots.size(); ++i) {
      const BufferSlot& s = l.slots[i];
      switch (s.kind) {
        case BufferSlot::Kind::input:
          ptrs[i] = inputs[s.index].data();
          break;
        case BufferSlot::Kind::constant:
          ptrs[i] = const_cast<uint8_t*>(constants[s.index]->bytes.data());
          break;
        case BufferSlot::Kind::temp:
          ptrs[i] = temps + (*offs)[s.index];
          break;
        case BufferSlot::Kind::output:
          ptrs[i] = outs[s.index].data();
          break;
      }
    }
    strides.clear();
    for (int arg : l.runtime_stride_args) {
      const auto& st = inputs[arg].strides();
      strides.insert(strides.end(), st.begin(), st.end());
    }
    l.kernel->launch(ptrs.data(), strides.data(), dims, sched, pool);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].alias_of < 0) continue;
    const Array& src = outs[outputs[i].alias_of];
    size_t bytes = static_cast<size_t>(src.numel()) * dtype_size(src.dtype());
    if (bytes) std::memcpy(outs[i].data(), src.data(), bytes);
  }
}

void CompiledKernel::launch(void* const* bufs, const int64_t* strides, const int64_t* dims,
                            const Schedule& sched, ThreadPool& pool) const {
  KernelFn f = fn;
  if (sched.extent <= sched.grain || pool.num_threads() <= 1) {
    f(bufs, strides, dims, 0, sched.extent);
  } else {
    pool.parallel_for(sched.extent, sched.grain,
                      [&](int64_t b, int64_t e) { f(bufs, strides, dims, b, e); });
  }
}

}  // namespace kiln
