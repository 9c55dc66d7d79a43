// kiln::Function: a traced, compiled, memoized function. kiln::jit wraps a C++ callable written
// against kiln::Tensor; calls with a new signature trace and compile, later calls dispatch.
#pragma once

#include <kiln/array.h>
#include <kiln/options.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace kiln {

// A traced body: inputs in, outputs out.
using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct KernelInfo {
  std::string name;
  std::string backend;  // "x86", "llvm", "cuda"
  std::string key;      // hex cache key
  std::string asm_text;
  std::string source;  // LLVM IR or CUDA source
  std::vector<std::string> ops;
};

struct Inspection {
  std::string graph;  // after passes
  std::vector<KernelInfo> kernels;
};

struct Stats {
  int64_t calls = 0;
  int64_t compiles = 0;
  int64_t memory_hits = 0;         // calls served by an executable already in memory
  int64_t disk_hits = 0;           // kernels loaded from the disk cache instead of compiled
  int64_t kernel_memory_hits = 0;  // kernels a compile found in the in-memory kernel cache
  int64_t variants = 0;
  int64_t variant_limit_hits = 0;
  int64_t fallbacks = 0;  // kernels that did not take their fast path
  // call()s whose outputs shared memory with an input: run into temporary outputs, then copied.
  int64_t aliased_output_calls = 0;
  std::map<std::string, int64_t> backend_kernels;  // kernels run per backend ("llvm", "x86")
  std::vector<std::string> recompile_reasons;
  std::vector<std::string> fallback_reasons;
};

class Function {
 public:
  Function(TraceFn fn, int arity, Options options = {}, std::string name = "fn");

  std::vector<Array> operator()(const std::vector<Array>& inputs) const;
  void call(std::span<const Array> inputs, std::span<Array> outputs) const;
  Inspection inspect(const std::vector<Array>& inputs) const;
  Stats stats() const;
  int arity() const;
  const Options& options() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

namespace detail {

template <typename T>
struct FnTraits : FnTraits<decltype(&T::operator())> {};
template <typename C, typename R, typename... A>
struct FnTraits<R (C::*)(A...) const> {
  static constexpr int arity = sizeof...(A);
  using Result = R;
};
template <typename C, typename R, typename... A>
struct FnTraits<R (C::*)(A...)> {
  static constexpr int arity = sizeof...(A);
  using Result = R;
};
template <typename R, typename... A>
struct FnTraits<R (*)(A...)> {
  static constexpr int arity = sizeof...(A);
  using Result = R;
};

inline void append_outputs(std::vector<Tensor>& out, const Tensor& t) { out.push_back(t); }
inline void append_outputs(std::vector<Tensor>& out, const std::vector<Tensor>& ts) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <typename... Ts>
void append_outputs(std::vector<Tensor>& out, const std::tuple<Ts...>& ts) {
  std::apply([&](const auto&... t) { (append_outputs(out, t), ...); }, ts);
}
template <typename... Ts>
void append_outputs(std::vector<Tensor>& out, const std::pair<Ts...>& ts) {
  append_outputs(out, ts.first);
  append_outputs(out, ts.second);
}

template <typename F, size_t... I>
std::vector<Tensor> invoke(F& f, const std::vector<Tensor>& in, std::index_sequence<I...>) {
  std::vector<Tensor> out;
  append_outputs(out, f(in[I]...));
  return out;
}

}  // namespace detail

// Wraps a callable taking N kiln::Tensor and returning a Tensor, a tuple/pair of Tensors or a
// std::vector<Tensor>.
template <typename F>
Function jit(F fn, Options options = {}) {
  constexpr int n = detail::FnTraits<std::decay_t<F>>::arity;
  TraceFn trace = [fn = std::move(fn)](const std::vector<Tensor>& in) mutable {
    return detail::invoke(fn, in, std::make_index_sequence<n>{});
  };
  return Function(std::move(trace), n, std::move(options));
}

}  // namespace kiln
