// kiln::Function: dispatch to a memoized variant. A call is served by an exact variant (found by
// the hash of its signature) or by the most specialized symbolic variant whose guards it passes;
// on a miss the shape policy says which dims become symbols, and the variant is traced and
// compiled once (concurrent callers of the same variant wait for that one compile).
#include "cache/disk_cache.h"
#include "cache/key.h"
#include "ir/builder.h"
#include "jit/aliasing.h"
#include "jit/compile.h"
#include "jit/executable.h"
#include "jit/shape_policy.h"
#include "jit/signature.h"
#include "jit/thread_pool.h"
#include "support/build_id.h"
#include "support/thread_counters.h"
#include "support/log.h"

#include <kiln/errors.h>
#include <kiln/function.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <optional>
#include <mutex>
#include <thread>
#include <shared_mutex>
#include <unordered_map>

namespace kiln {

struct Function::State {
  explicit State(const Options& o) : policy(o) {}
  TraceFn trace;
  int arity = 0;
  Options options;
  std::string name;
  ShapePolicy policy;

  std::shared_mutex table_mu;
  struct Variant {
    VariantGuard guard;
    std::shared_ptr<Executable> exe;
  };
  struct ExactEntry {
    Signature sig;
    std::shared_ptr<Executable> exe;
    // Per argument, the bytes a contiguous one spans from its data pointer; -1 where strided
    // (call()'s overlap check reads these instead of walking the shapes).
    std::vector<int64_t> arg_bytes;
  };
  // Exact variants by signature hash. Entries are never removed or moved (own allocations), so
  // the last one that served a call can be checked first without the lock (last_exact).
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<const ExactEntry>>> exact;
  std::atomic<const ExactEntry*> last_exact{nullptr};
  std::vector<Variant> symbolic;  // most specialized first
  std::mutex inflight_mu;
  // A compile in flight: its result, and the thread that traces and builds it.
  struct Inflight {
    std::shared_future<std::shared_ptr<Executable>> result;
    std::thread::id thread;
  };
  std::unordered_map<std::string, Inflight> inflight;

  // Shape decisions saved in the disk cache (automatic mode): restored before the first compile.
  std::once_flag restore_once;
  std::optional<cache::CacheKey> decisions_key;  // none: not persisted

  // Counted on every call: per-thread slots (no lock-prefixed add on the hit path).
  enum CallCount : size_t { kCalls, kMemoryHits, kAliasedOutputs, kCallCounts };
  ThreadCounters<kCallCounts, 8> counts;
  std::atomic<int64_t> compiles{0}, kernel_memory_hits{0}, disk_hits{0}, fallbacks{0},
      variant_limit_hits{0};
  std::once_flag aliased_output_logged;
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

VariantGuard exact_guard(std::span<const Array> args) {
  VariantGuard g;
  for (const Array& a : args)
    g.args.push_back({a.dtype(), a.is_contiguous(), ir::concrete_shape(a.shape())});
  return g;
}

ir::Graph trace(Function::State& s, const VariantGuard& guard) {
  ir::Graph g;
  std::vector<Tensor> args;
  for (size_t i = 0; i < guard.args.size(); ++i) {
    auto in = ir::make_input(static_cast<int64_t>(i), guard.args[i].dtype, guard.args[i].dims);
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
  // A Tensor kept from another trace (stored in Python state, say) reads that trace's inputs,
  // which this graph would bind to its own arguments of the same numbers: wrong values, silently.
  for (const ir::NodePtr& n : g.topo_order())
    if (n->op == ir::Op::Input &&
        (n->attrs.arg < 0 || n->attrs.arg >= static_cast<int64_t>(g.inputs.size()) ||
         g.inputs[static_cast<size_t>(n->attrs.arg)] != n))
      throw CompileError(s.name + ": the result reads a kiln.Tensor made by another trace (" +
                         "its input " + std::to_string(n->attrs.arg) + "), kept from an " +
                         "earlier call; pass its value as an argument or compute it here");
  return g;
}

// Whether `device` names a device kiln knows: "cpu", "cuda" or "cuda:N".
bool known_device(const std::string& device) {
  if (device == "cpu" || device == "cuda") return true;
  const std::string prefix = "cuda:";
  return device.size() > prefix.size() && device.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(device.begin() + prefix.size(), device.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::shared_ptr<Executable> build(Function::State& s, const VariantGuard& guard, bool keep_text,
                                  CompileReport& report) {
  // No backend compiles for a GPU yet: running a function asked for one on the CPU instead would
  // hide where it ran.
  if (s.options.device != "cpu")
    throw DeviceError(s.name + ": device \"" + s.options.device +
                      "\" was asked for, but this build of kiln has no CUDA backend: it compiles "
                      "for the CPU only (device \"cpu\")");
  ir::Graph g = trace(s, guard);
  CompileRequest req;
  req.graph = &g;
  req.guard = &guard;
  req.options = &s.options;
  req.function_name = s.name;
  req.keep_text = keep_text;
  return compile_executable(req, report);
}

// The exact entry for `args` (table_mu held by the caller), or null.
const Function::State::ExactEntry* exact_entry(const Function::State& s, uint64_t hash,
                                               std::span<const Array> args) {
  auto it = s.exact.find(hash);
  if (it == s.exact.end()) return nullptr;
  for (const auto& e : it->second)
    if (matches(e->sig, args)) return e.get();
  return nullptr;
}

// Tables only grow and their executables live as long as the State: lookups hand out raw
// pointers (no reference count touched on the hit path).
const Function::State::ExactEntry* find_exact(Function::State& s, uint64_t hash,
                                              std::span<const Array> args) {
  // A serving loop repeating one signature takes no lock: the last entry that served.
  const Function::State::ExactEntry* last = s.last_exact.load(std::memory_order_acquire);
  if (last && last->sig.hash == hash && matches(last->sig, args)) return last;
  std::shared_lock<std::shared_mutex> lock(s.table_mu);
  const Function::State::ExactEntry* e = exact_entry(s, hash, args);
  if (!e) return nullptr;
  s.last_exact.store(e, std::memory_order_release);
  return e;
}

// The symbols' extents of the last symbolic hit on this thread (read by the run that follows).
std::vector<int64_t>& bound_dims() {
  thread_local std::vector<int64_t> dims;
  return dims;
}

// The most specialized symbolic variant whose guards `args` pass, its symbols bound into `dims`
// (table_mu held by the caller).
const Function::State::Variant* match_symbolic(const Function::State& s,
                                               std::span<const Array> args,
                                               std::vector<int64_t>& dims) {
  for (const auto& v : s.symbolic) {
    if (dims.size() < static_cast<size_t>(v.guard.num_symbols()))
      dims.resize(v.guard.num_symbols());
    if (v.guard.bind(args, dims.data())) return &v;
  }
  return nullptr;
}

Executable* find_symbolic(Function::State& s, std::span<const Array> args,
                          std::vector<int64_t>& dims) {
  std::shared_lock<std::shared_mutex> lock(s.table_mu);
  const Function::State::Variant* v = match_symbolic(s, args, dims);
  return v ? v->exe.get() : nullptr;
}

int64_t variant_count(Function::State& s) {
  std::shared_lock<std::shared_mutex> lock(s.table_mu);
  int64_t n = static_cast<int64_t>(s.symbolic.size());
  for (const auto& [hash, bucket] : s.exact) n += static_cast<int64_t>(bucket.size());
  return n;
}

std::shared_ptr<Executable> find_compiled(Function::State& s, const VariantGuard& guard,
                                          std::span<const Array> args) {
  std::shared_lock<std::shared_mutex> lock(s.table_mu);
  if (guard.is_exact()) {
    const Function::State::ExactEntry* e = exact_entry(s, exact_signature_hash(args), args);
    return e ? e->exe : nullptr;
  }
  for (const auto& v : s.symbolic)
    if (v.guard == guard) return v.exe;
  return nullptr;
}

void insert_variant(Function::State& s, const VariantGuard& guard, std::span<const Array> args,
                    std::shared_ptr<Executable> exe) {
  std::unique_lock<std::shared_mutex> lock(s.table_mu);
  if (guard.is_exact()) {
    Signature sig = exact_signature(args);
    const uint64_t hash = sig.hash;
    std::vector<int64_t> arg_bytes;
    for (const ArgSig& a : sig.args) {
      int64_t n = static_cast<int64_t>(dtype_size(a.dtype));
      for (int64_t d : a.shape) n *= d;
      arg_bytes.push_back(a.contiguous ? n : -1);
    }
    s.exact[hash].push_back(std::make_unique<const Function::State::ExactEntry>(
        Function::State::ExactEntry{std::move(sig), std::move(exe), std::move(arg_bytes)}));
    return;
  }
  auto at = std::find_if(s.symbolic.begin(), s.symbolic.end(), [&](const auto& v) {
    return v.guard.specificity() < guard.specificity();
  });
  s.symbolic.insert(at, {guard, std::move(exe)});
}

// Restores the shape decisions an earlier process saved for this program (automatic mode with
// the disk cache on). The program is identified by its shape-free structure, so the first call
// traces once more at its exact shapes.
void restore_decisions(Function::State& s, std::span<const Array> args) {
  if (s.options.dynamic != DynamicMode::automatic || !s.options.cache) return;
  cache::DiskCache& disk = cache::DiskCache::global();
  if (!disk.enabled()) return;
  uint64_t program = 0;
  try {
    program = trace(s, exact_guard(args)).shape_free_hash();
  } catch (const Error&) {
    return;  // the compile that follows reports the error
  }
  std::string ranks;
  for (const Array& a : args)
    ranks += std::string(dtype_name(a.dtype())) + std::to_string(a.shape().size()) + " ";
  cache::KeyBuilder kb;
  kb.add("kiln", KILN_VERSION)
      .add("kiln_build", build_id())
      .add("shape_decisions", s.name)
      .add("args", ranks);
  kb.add("program", static_cast<int64_t>(program));
  s.decisions_key = kb.finish();
  if (auto payload = disk.load(*s.decisions_key, cache::PayloadKind::shape_decisions)) {
    std::string text(payload->begin(), payload->end());
    s.policy.restore(text, args);
    KILN_LOG_AT(info) << s.name << ": restored shape decisions from the disk cache";
  }
}

void save_decisions(Function::State& s) {
  if (!s.decisions_key) return;
  cache::DiskCache& disk = cache::DiskCache::global();
  if (!disk.writable()) return;
  std::string text = s.policy.settled();
  disk.store(*s.decisions_key, cache::PayloadKind::shape_decisions,
             std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

void record_compile(Function::State& s, const CompileReport& report, const std::string& reason) {
  s.compiles.fetch_add(1);
  s.kernel_memory_hits.fetch_add(report.memory_hits);
  s.disk_hits.fetch_add(report.disk_hits);
  std::lock_guard<std::mutex> lock(s.stats_mu);
  s.recompile_reasons.push_back(reason);
  for (const auto& b : report.backends) ++s.backend_kernels[b];
  for (const auto& f : report.fallbacks) s.fallback_reasons.push_back(f);
  s.fallbacks.fetch_add(static_cast<int64_t>(report.fallbacks.size()));
  KILN_LOG_AT(info) << s.name << ": compiled (" << reason << "): " << report.kernels << " kernels ("
                    << report.compiled << " compiled, " << report.memory_hits << " from memory, "
                    << report.disk_hits << " from disk)";
}

// Compiles the variant `guard` once; concurrent callers of the same variant wait for it.
std::shared_ptr<Executable> compile_variant(Function::State& s, const VariantGuard& guard,
                                            std::span<const Array> args,
                                            const std::string& reason) {
  const std::string id = guard.str();
  std::promise<std::shared_ptr<Executable>> promise;
  std::shared_future<std::shared_ptr<Executable>> fut;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(s.inflight_mu);
    if (auto exe = find_compiled(s, guard, args)) return exe;  // compiled while we decided
    auto it = s.inflight.find(id);
    if (it != s.inflight.end()) {
      // The function called again with these arguments from its own trace (directly or through
      // another jitted function): waiting for that compile would wait for itself.
      if (it->second.thread == std::this_thread::get_id())
        throw CompileError(s.name + "() was called with the same argument shapes and dtypes (" +
                           id + ") while it was being traced for them: a recursive call cannot " +
                           "be compiled; unroll it in Python or call the Python function itself");
      fut = it->second.result;
    } else {
      fut = promise.get_future().share();
      s.inflight.emplace(id, Function::State::Inflight{fut, std::this_thread::get_id()});
      owner = true;
    }
  }
  if (!owner) return fut.get();  // rethrows the owner's compile error
  auto finish = [&] {
    std::lock_guard<std::mutex> lock(s.inflight_mu);
    s.inflight.erase(id);
  };
  try {
    CompileReport report;
    auto exe = build(s, guard, false, report);
    record_compile(s, report, reason);
    insert_variant(s, guard, args, exe);
    finish();
    promise.set_value(exe);
    return exe;
  } catch (...) {
    finish();
    promise.set_exception(std::current_exception());
    throw;
  }
}

std::string call_str(std::span<const Array> args) { return exact_guard(args).str(); }

struct Hit {
  Executable* exe = nullptr;
  std::shared_ptr<Executable> owner;  // a just-compiled executable; table hits need none
  const int64_t* dims = nullptr;
  const int64_t* arg_bytes = nullptr;  // an exact hit's (ExactEntry::arg_bytes)
};

// A just-compiled variant serving its call, with the symbols bound.
Hit hit_of(std::shared_ptr<Executable> exe, const VariantGuard& guard,
           std::span<const Array> args) {
  Hit hit{exe.get(), std::move(exe), nullptr};
  if (!guard.is_exact()) {
    auto& dims = bound_dims();
    dims.resize(std::max<size_t>(dims.size(), guard.num_symbols()));
    KILN_CHECK(guard.bind(args, dims.data()))
        << "a variant does not serve the call it was compiled for: " << guard.str();
    hit.dims = dims.data();
  }
  return hit;
}

// The variant `d` failed to trace or compile. Either the program cannot take some of its symbols
// (a reshape that merges them, a slice with a bound, Python arithmetic on a shape...) or the call
// is wrong at any shape. Symbols are tried one at a time (a trace each, no compile): those the
// program takes stay symbolic, the others are pinned exact from now on. When none is left the
// exact variant says which case it is (its error is the user's).
Hit compile_with_fewer_symbols(Function::State& s, const ShapePolicy::Decision& d,
                               std::span<const Array> args, const std::string& reason,
                               const std::string& why) {
  const int n = d.guard.num_symbols();
  std::vector<bool> keep(n, false);
  for (int sym = 0; sym < n; ++sym) {
    keep[sym] = true;
    try {
      trace(s, keep_symbols(d.guard, args, keep));
    } catch (const Error&) {
      keep[sym] = false;
    }
  }
  VariantGuard guard = keep_symbols(d.guard, args, keep);
  std::string note = "; the symbolic trace failed (" + why + ")";
  std::shared_ptr<Executable> exe;
  try {
    exe = compile_variant(s, guard, args, reason + note + "; compiled " + guard.str());
  } catch (const Error&) {
    if (guard.is_exact()) throw;
    keep.assign(n, false);
    guard = exact_guard(args);
    exe = compile_variant(s, guard, args, reason + note + "; compiled exact");
  }
  std::vector<bool> rejected(n);
  for (int sym = 0; sym < n; ++sym) rejected[sym] = !keep[sym];
  // A pinned dim is a fallback from the dynamic path (its extents now compile one by one):
  // counted and logged like a kernel that missed its fast path.
  auto pinned = s.policy.pin(d.guard, rejected, args, why);
  if (d.settled_changed) save_decisions(s);  // without the pinned dims
  {
    std::lock_guard<std::mutex> lock(s.stats_mu);
    for (const auto& r : pinned) {
      KILN_LOG_AT(warn) << s.name << ": " << r;
      s.recompile_reasons.push_back(r);
      s.fallback_reasons.push_back(r);
    }
    s.fallbacks.fetch_add(static_cast<int64_t>(pinned.size()));
  }
  return hit_of(exe, guard, args);
}

// A call no variant serves: the policy picks the variant to compile.
Hit compile_for(Function::State& s, std::span<const Array> args) {
  // restore_decisions traces the function once: a call of it from inside that trace (a
  // recursive call) would wait on the once_flag it holds.
  thread_local std::vector<const Function::State*> restoring;
  if (std::find(restoring.begin(), restoring.end(), &s) != restoring.end())
    throw CompileError(
        s.name + "() was called while it was being traced: a recursive call " +
        "cannot be compiled; unroll it in Python or call the Python function itself");
  std::call_once(s.restore_once, [&] {
    restoring.push_back(&s);
    try {
      restore_decisions(s, args);
    } catch (...) {
      restoring.pop_back();
      throw;
    }
    restoring.pop_back();
  });
  const int64_t variants = variant_count(s);
  const bool at_bound = variants >= s.options.max_variants;
  if (at_bound) {
    s.variant_limit_hits.fetch_add(1);
    KILN_LOG_AT(warn) << s.name << ": " << variants << " variants reached the bound ("
                      << s.options.max_variants << "); compiling the most general variant for "
                      << call_str(args);
  }
  ShapePolicy::Decision d = s.policy.decide(args, at_bound);
  std::string reason;
  for (const auto& r : d.reasons) reason += (reason.empty() ? "" : "; ") + r;
  if (reason.empty())
    reason = (variants == 0 ? "first call: " : "no variant matches ") + call_str(args);
  if (at_bound) reason += " (variant bound reached: most general variant)";
  if (!d.guard.is_exact()) reason += "; variant " + d.guard.str();
  if (d.settled_changed) save_decisions(s);
  try {
    return hit_of(compile_variant(s, d.guard, args, reason), d.guard, args);
  } catch (const Error& e) {
    if (d.guard.is_exact()) throw;
    return compile_with_fewer_symbols(s, d, args, reason, e.what());
  }
}

// The hit path allocates nothing: the hash comes straight from the arrays.
Hit lookup(Function::State& s, std::span<const Array> inputs) {
  check_args(s, inputs);
  if (const auto* e = find_exact(s, exact_signature_hash(inputs), inputs)) {
    s.counts.add(Function::State::kMemoryHits);
    return {e->exe.get(), nullptr, nullptr, e->arg_bytes.data()};
  }
  auto& dims = bound_dims();
  if (Executable* exe = find_symbolic(s, inputs, dims)) {
    s.counts.add(Function::State::kMemoryHits);
    return {exe, nullptr, dims.data()};
  }
  return compile_for(s, inputs);
}

void check_outputs(const Function::State& s, const Executable& exe, const int64_t* dims,
                   std::span<Array> outputs) {
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
    const ir::Shape& want_dims = o.shape;
    bool same = a.shape().size() == want_dims.size();
    for (size_t d = 0; same && d < want_dims.size(); ++d)
      same = a.shape()[d] == ir::dim_value(want_dims[d], dims);
    if (!same || !a.is_contiguous()) {
      std::vector<int64_t> shape = exe.output_shape(i, dims);
      std::string want, got;
      for (int64_t d : shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      for (int64_t d : a.shape()) got += (got.empty() ? "" : ",") + std::to_string(d);
      throw ShapeError(s.name + ": output " + std::to_string(i) +
                       " must be a contiguous array of shape [" + want + "], got [" + got + "]" +
                       (a.is_contiguous() ? "" : " (strided)"));
    }
    if (a.data() == nullptr && a.numel() > 0)
      throw Error(s.name + ": output " + std::to_string(i) + " has no data (a null pointer)");
  }
}

// An output shares memory with an input: kernels may write it before they have read all of the
// input, so the call runs into fresh outputs and copies them over (counted, logged once).
[[gnu::noinline, gnu::cold]] void call_through_temporaries(Function::State& s, const Hit& hit,
                                                           std::span<const Array> inputs,
                                                           std::span<Array> outputs) {
  s.counts.add(Function::State::kAliasedOutputs);
  std::call_once(s.aliased_output_logged, [&] {
    KILN_LOG_AT(warn) << s.name
                      << ": an output shares memory with an input; such calls run into "
                         "temporary outputs and copy them (Stats::aliased_output_calls)";
  });
  std::vector<Array> fresh;
  fresh.reserve(outputs.size());
  for (const Array& o : outputs) fresh.push_back(Array::empty(o.shape(), o.dtype()));
  hit.exe->run(inputs, fresh, ThreadPool::global(), hit.dims);
  for (size_t i = 0; i < outputs.size(); ++i)  // both contiguous (check_outputs)
    std::memcpy(outputs[i].data(), fresh[i].data(),
                size_t(outputs[i].numel()) * dtype_size(outputs[i].dtype()));
}

}  // namespace

Function::Function(TraceFn fn, int arity, Options options, std::string name)
    : state_(std::make_shared<State>(options)) {
  state_->trace = std::move(fn);
  state_->arity = arity;
  state_->options = std::move(options);
  state_->name = std::move(name);
  if (!known_device(state_->options.device))
    throw Error(state_->name + ": Options::device must be \"cpu\", \"cuda\" or \"cuda:N\", got \"" +
                state_->options.device + "\"");
  if (state_->options.max_variants < 1)
    throw Error(state_->name + ": Options::max_variants must be at least 1, got " +
                std::to_string(state_->options.max_variants));
}

std::vector<Array> Function::operator()(const std::vector<Array>& inputs) const {
  State& s = *state_;
  Hit hit = lookup(s, inputs);
  s.counts.add(State::kCalls);
  std::vector<Array> outs;
  outs.reserve(hit.exe->outputs.size());
  for (size_t i = 0; i < hit.exe->outputs.size(); ++i)
    outs.push_back(Array::empty(hit.exe->output_shape(i, hit.dims), hit.exe->outputs[i].dtype));
  hit.exe->run(inputs, outs, ThreadPool::global(), hit.dims);
  return outs;
}

void Function::call(std::span<const Array> inputs, std::span<Array> outputs) const {
  State& s = *state_;
  Hit hit = lookup(s, inputs);
  s.counts.add(State::kCalls);
  check_outputs(s, *hit.exe, hit.dims, outputs);
  // (About 6 ns of a 16^3 matmul's ~90 ns call, with an exact hit's argument sizes at hand.)
  if (__builtin_expect(outputs_overlap_inputs(inputs, outputs, hit.arg_bytes), 0))
    return call_through_temporaries(s, hit, inputs, outputs);
  hit.exe->run(inputs, outputs, ThreadPool::global(), hit.dims);
}

Inspection Function::inspect(const std::vector<Array>& inputs) const {
  State& s = *state_;
  check_args(s, inputs);
  // The variant that serves (or would serve) this call: a symbolic one when one matches.
  VariantGuard guard = exact_guard(inputs);
  {
    std::shared_lock<std::shared_mutex> lock(s.table_mu);
    std::vector<int64_t> dims;
    if (const State::Variant* v = match_symbolic(s, inputs, dims)) guard = v->guard;
  }
  CompileReport report;
  auto exe = build(s, guard, true, report);
  Inspection ins;
  ins.graph = exe->graph_text;
  ins.kernels = exe->kernel_infos;
  return ins;
}

Stats Function::stats() const {
  State& s = *state_;
  Stats st;
  st.calls = s.counts.sum(State::kCalls);
  st.compiles = s.compiles.load();
  st.memory_hits = s.counts.sum(State::kMemoryHits);
  st.aliased_output_calls = s.counts.sum(State::kAliasedOutputs);
  st.kernel_memory_hits = s.kernel_memory_hits.load();
  st.disk_hits = s.disk_hits.load();
  st.fallbacks = s.fallbacks.load();
  st.variant_limit_hits = s.variant_limit_hits.load();
  st.variants = variant_count(s);
  std::lock_guard<std::mutex> lock(s.stats_mu);
  st.backend_kernels = s.backend_kernels;
  st.recompile_reasons = s.recompile_reasons;
  st.fallback_reasons = s.fallback_reasons;
  return st;
}

int Function::arity() const { return state_->arity; }
const Options& Function::options() const { return state_->options; }

}  // namespace kiln
