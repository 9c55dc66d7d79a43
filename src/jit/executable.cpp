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

// Per-thread scratch of Executable::run, touched only when a call needs it (temps, symbolic
// offsets, many buffers or runtime strides): each thread_local access in a shared library is a
// __tls_get_addr call, ~11% of a 16^3 matmul's f.call when four of them were made every call.
struct RunScratch {
  Arena arena;
  std::vector<void*> ptrs;
  std::vector<int64_t> strides;
  std::vector<int64_t> offsets;
};
RunScratch& run_scratch() {
  thread_local RunScratch scratch;
  return scratch;
}

}  // namespace

std::vector<int64_t> Executable::output_shape(size_t i, const int64_t* dims) const {
  return ir::resolve_dims(outputs[i].shape, dims);
}

void Executable::run(std::span<const Array> inputs, std::span<Array> outs, ThreadPool& pool,
                     const int64_t* dims) const {
  RunScratch* scratch = nullptr;
  auto tls = [&]() -> RunScratch& {
    if (!scratch) scratch = &run_scratch();
    return *scratch;
  };
  const std::vector<int64_t>* offs = &temp_offsets;
  int64_t bytes_needed = temp_bytes;
  if (symbolic) {
    std::vector<int64_t>& offsets = tls().offsets;
    offsets.resize(temp_shapes.size());
    bytes_needed = 0;
    for (size_t t = 0; t < temp_shapes.size(); ++t) {
      offsets[t] = bytes_needed;
      int64_t bytes = ir::numel(temp_shapes[t], dims) * temp_elem_bytes[t];
      bytes_needed += (bytes + 63) / 64 * 64;
    }
    offs = &offsets;
  }
  char* temps = bytes_needed ? static_cast<char*>(tls().arena.get(bytes_needed)) : nullptr;
  constexpr size_t kStackSlots = 16;
  void* stack_ptrs[kStackSlots];
  for (const Launch& l : launches) {
    const Schedule sched = l.spec.symbolic ? l.spec.eval(dims) : l.sched;
    if (sched.extent == 0) continue;
    void** ptrs = stack_ptrs;
    if (l.slots.size() > kStackSlots) {
      tls().ptrs.resize(l.slots.size());
      ptrs = tls().ptrs.data();
    }
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
    const int64_t* strides = nullptr;
    if (!l.runtime_stride_args.empty()) {
      std::vector<int64_t>& st = tls().strides;
      st.clear();
      for (int arg : l.runtime_stride_args) {
        const auto& in = inputs[arg].strides();
        st.insert(st.end(), in.begin(), in.end());
      }
      strides = st.data();
    }
    l.kernel->launch(ptrs, strides, dims, sched, pool);
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
