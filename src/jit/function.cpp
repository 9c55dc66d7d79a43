// kiln::Function: dispatch by signature to a memoized Executable; on a miss, trace once,
// compile once (concurrent callers of the same signature wait for that one compile), publish.
#include "ir/builder.h"
#include "jit/compile.h"
#include "jit/executable.h"
#include "jit/signature.h"
#include "jit/thread_pool.h"
#include "support/log.h"

#include <kiln/errors.h>
#include <kiln/function.h>

#include <atomic>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace kiln {

struct Function::State {
  TraceFn trace;
  int arity = 0;
  Options options;
  std::string name;

  std::shared_mutex table_mu;
  struct Variant {
    Signature sig;
    std::shared_ptr<Executable> exe;
  };
  std::unordered_map<uint64_t, std::vector<Variant>> table;  // by signature hash
  std::mutex inflight_mu;
  std::unordered_map<Signature, std::shared_future<std::shared_ptr<Executable>>, SignatureHash>
      inflight;

  std::atomic<int64_t> calls{0}, compiles{0}, memory_hits{0}, kernel_memory_hits{0}, disk_hits{0},
      fallbacks{0};
  std::mutex stats_mu;
  std::map<std::string, int64_t> backend_kernels;
  std::vector<std::string> recompile_reasons, fallback_reasons;
};

namespace {

void check_args(const Function::State& s, std::span<const Array> inputs) {
  if (static_cast<int>(inputs.size()) != s.arity)
    throw Error(s.name + ": expected " + std::to_string(s.arity) + " arguments, got " +
                std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].data() == nullptr && inputs[i].numel() > 0)
      throw Error(s.name + ": argument " + std::to_string(i) + " has no data (a null pointer)");
}

ir::Graph trace(Function::State& s, const Signature& sig) {
  ir::Graph g;
  std::vector<Tensor> args;
  for (size_t i = 0; i < sig.args.size(); ++i) {
    auto in = ir::make_input(static_cast<int64_t>(i), sig.args[i].dtype,
                             ir::concrete_shape(sig.args[i].shape));
    g.inputs.push_back(in);
    args.emplace_back(in);
  }
  std::vector<Tensor> outs = s.trace(args);
  if (outs.empty()) throw Error(s.name + ": the traced function returned no tensors");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined())
      throw Error(s.name + ": output " + std::to_string(i) + " is an undefined Tensor");
    g.outputs.push_back(outs[i].node());
  }
  return g;
}

std::shared_ptr<Executable> build(Function::State& s, const Signature& sig, bool keep_text,
                                  CompileReport& report) {
  ir::Graph g = trace(s, sig);
  CompileRequest req;
  req.graph = &g;
  req.signature = &sig;
  req.options = &s.options;
  req.function_name = s.name;
  req.keep_text = keep_text;
  return compile_executable(req, report);
}

std::shared_ptr<Executable> find_variant(Function::State& s, uint64_t hash,
                                         std::span<const Array> args) {
  std::shared_lock<std::shared_mutex> lock(s.table_mu);
  auto it = s.table.find(hash);
  if (it == s.table.end()) return nullptr;
  for (const auto& v : it->second)
    if (matches(v.sig, args)) return v.exe;
  return nullptr;
}

std::shared_ptr<Executable> find_variant(Function::State& s, const Signature& sig) {
  std::shared_lock<std::shared_mutex> lock(s.table_mu);
  auto it = s.table.find(sig.hash);
  if (it == s.table.end()) return nullptr;
  for (const auto& v : it->second)
    if (v.sig == sig) return v.exe;
  return nullptr;
}

std::shared_ptr<Executable> compile_variant(Function::State& s, const Signature& sig) {
  std::promise<std::shared_ptr<Executable>> promise;
  std::shared_future<std::shared_ptr<Executable>> fut;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(s.inflight_mu);
    if (auto exe = find_variant(s, sig)) return exe;
    auto it = s.inflight.find(sig);
    if (it != s.inflight.end()) {
      fut = it->second;
    } else {
      fut = promise.get_future().share();
      s.inflight.emplace(sig, fut);
      owner = true;
    }
  }
  if (!owner) return fut.get();  // rethrows the owner's compile error
  try {
    CompileReport report;
    auto exe = build(s, sig, false, report);
    s.compiles.fetch_add(1);
    s.kernel_memory_hits.fetch_add(report.memory_hits);
    s.disk_hits.fetch_add(report.disk_hits);
    {
      std::lock_guard<std::mutex> lock(s.stats_mu);
      std::string reason =
          s.compiles.load() == 1 ? "first call with " + sig.str() : "new signature " + sig.str();
      s.recompile_reasons.push_back(reason);
      for (const auto& b : report.backends) ++s.backend_kernels[b];
      for (const auto& f : report.fallbacks) s.fallback_reasons.push_back(f);
      s.fallbacks.fetch_add(static_cast<int64_t>(report.fallbacks.size()));
      KILN_LOG_AT(info) << s.name << ": " << report.kernels << " kernels (" << report.compiled
                        << " compiled, " << report.memory_hits << " from memory, "
                        << report.disk_hits << " from disk) for " << reason;
    }
    {
      std::unique_lock<std::shared_mutex> lock(s.table_mu);
      s.table[sig.hash].push_back({sig, exe});
    }
    {
      std::lock_guard<std::mutex> lock(s.inflight_mu);
      s.inflight.erase(sig);
    }
    promise.set_value(exe);
    return exe;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(s.inflight_mu);
      s.inflight.erase(sig);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

void check_outputs(const Function::State& s, const Executable& exe, std::span<Array> outputs) {
  if (outputs.size() != exe.outputs.size())
    throw Error(s.name + ": expected " + std::to_string(exe.outputs.size()) +
                " output arrays, got " + std::to_string(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputSpec& o = exe.outputs[i];
    const Array& a = outputs[i];
    if (a.dtype() != o.dtype)
      throw DTypeError(s.name + ": output " + std::to_string(i) + " must be " +
                       std::string(dtype_name(o.dtype)) + ", got " +
                       std::string(dtype_name(a.dtype())));
    if (a.shape() != o.shape || !a.is_contiguous()) {
      std::string want, got;
      for (int64_t d : o.shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      for (int64_t d : a.shape()) got += (got.empty() ? "" : ",") + std::to_string(d);
      throw ShapeError(s.name + ": output " + std::to_string(i) +
                       " must be a contiguous array of shape [" + want + "], got [" + got + "]" +
                       (a.is_contiguous() ? "" : " (strided)"));
    }
    if (a.data() == nullptr && a.numel() > 0)
      throw Error(s.name + ": output " + std::to_string(i) + " has no data (a null pointer)");
  }
}

}  // namespace

Function::Function(TraceFn fn, int arity, Options options, std::string name)
    : state_(std::make_shared<State>()) {
  state_->trace = std::move(fn);
  state_->arity = arity;
  state_->options = std::move(options);
  state_->name = std::move(name);
}

namespace {
// The hit path allocates nothing: the hash comes straight from the arrays.
std::shared_ptr<Executable> lookup(Function::State& s, std::span<const Array> inputs) {
  check_args(s, inputs);
  if (auto exe = find_variant(s, exact_signature_hash(inputs), inputs)) {
    s.memory_hits.fetch_add(1, std::memory_order_relaxed);
    return exe;
  }
  return compile_variant(s, exact_signature(inputs));
}
}  // namespace

std::vector<Array> Function::operator()(const std::vector<Array>& inputs) const {
  State& s = *state_;
  auto exe = lookup(s, inputs);
  s.calls.fetch_add(1, std::memory_order_relaxed);
  std::vector<Array> outs;
  outs.reserve(exe->outputs.size());
  for (const OutputSpec& o : exe->outputs) outs.push_back(Array::empty(o.shape, o.dtype));
  exe->run(inputs, outs, ThreadPool::global());
  return outs;
}

void Function::call(std::span<const Array> inputs, std::span<Array> outputs) const {
  State& s = *state_;
  auto exe = lookup(s, inputs);
  s.calls.fetch_add(1, std::memory_order_relaxed);
  check_outputs(s, *exe, outputs);
  exe->run(inputs, outputs, ThreadPool::global());
}

Inspection Function::inspect(const std::vector<Array>& inputs) const {
  State& s = *state_;
  check_args(s, inputs);
  Signature sig = exact_signature(inputs);
  CompileReport report;
  auto exe = build(s, sig, true, report);
  Inspection ins;
  ins.graph = exe->graph_text;
  ins.kernels = exe->kernel_infos;
  return ins;
}

Stats Function::stats() const {
  State& s = *state_;
  Stats st;
  st.calls = s.calls.load();
  st.compiles = s.compiles.load();
  st.memory_hits = s.memory_hits.load();
  st.kernel_memory_hits = s.kernel_memory_hits.load();
  st.disk_hits = s.disk_hits.load();
  st.fallbacks = s.fallbacks.load();
  {
    std::shared_lock<std::shared_mutex> lock(s.table_mu);
    for (const auto& [hash, bucket] : s.table) st.variants += static_cast<int64_t>(bucket.size());
  }
  std::lock_guard<std::mutex> lock(s.stats_mu);
  st.backend_kernels = s.backend_kernels;
  st.recompile_reasons = s.recompile_reasons;
  st.fallback_reasons = s.fallback_reasons;
  return st;
}

int Function::arity() const { return state_->arity; }
const Options& Function::options() const { return state_->options; }

}  // namespace kiln
