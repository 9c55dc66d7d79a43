// kiln._kiln.JitFunction: what @kiln.jit returns. A call converts its arguments to kiln::Array
// views, picks the kiln::Function for this arity / Python-scalar pattern / static values, runs it
// with the GIL released and wraps the outputs as numpy arrays: one C++ call, no Python-level loop.
// On a cache miss kiln::Function calls back into Python (kiln._trace.run_trace) to trace.
#include "common.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace kiln::py {

void clear_trace_loc();  // tensor.cpp

namespace {

// A Python exception raised while tracing, kept (on the thread that traced) so that the caller
// gets the original exception and traceback rather than its C++ translation.
struct PendingError {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* tb = nullptr;
  void clear() {  // GIL held
    Py_CLEAR(type);
    Py_CLEAR(value);
    Py_CLEAR(tb);
  }
};
thread_local PendingError tl_pending;

// One kiln::Function: traced once for an arity, a Python-scalar pattern and static values.
struct Entry {
  size_t nargs = 0;
  uint64_t scalar_mask = 0;  // bit i: argument i was a Python number (weakly typed)
  nb::object static_key;     // None, or the tuple of static values
  std::vector<int> static_pos;
  nb::list static_values;
  bool single_output = true;  // false: the function returned a tuple or list
  std::unique_ptr<Function> fn;
};

class JitFunction {
 public:
  JitFunction(nb::object fn, nb::object trace_helper, int dynamic_mode,
              std::map<int, std::vector<int>> dynamic_dims, std::string device,
              std::vector<int> static_argnums, bool cache, int min_args, int max_args,
              std::vector<std::string> param_names, std::string name, int max_variants)
      : fn_(std::move(fn)),
        trace_helper_(std::move(trace_helper)),
        dynamic_dims_(std::move(dynamic_dims)),
        static_argnums_(std::move(static_argnums)),
        min_args_(min_args),
        max_args_(max_args),
        param_names_(std::move(param_names)),
        name_(std::move(name)) {
    options_.dynamic = static_cast<DynamicMode>(dynamic_mode);
    options_.device = std::move(device);
    options_.cache = cache;
    if (max_variants > 0) options_.max_variants = max_variants;
  }

  JitFunction(const JitFunction&) = delete;
  JitFunction& operator=(const JitFunction&) = delete;

  nb::object call(nb::args args, nb::kwargs kwargs) {
    Prepared p = prepare(args, kwargs);
    std::vector<Array> outs;
    run_guarded([&] { outs = (*p.entry->fn)(p.inputs); });
    return wrap_outputs(*p.entry, outs);
  }

  Inspection inspect(nb::args args, nb::kwargs kwargs) {
    Prepared p = prepare(args, kwargs);
    Inspection result;
    run_guarded([&] { result = p.entry->fn->inspect(p.inputs); });
    return result;
  }

  nb::dict stats() const {
    Stats total;
    for (const auto& e : entries_) {
      Stats s = e->fn->stats();
      total.calls += s.calls;
      total.compiles += s.compiles;
      total.memory_hits += s.memory_hits;
      total.disk_hits += s.disk_hits;
      total.variants += s.variants;
      total.variant_limit_hits += s.variant_limit_hits;
      total.fallbacks += s.fallbacks;
      for (const auto& [k, v] : s.backend_kernels) total.backend_kernels[k] += v;
      total.recompile_reasons.insert(total.recompile_reasons.end(), s.recompile_reasons.begin(),
                                     s.recompile_reasons.end());
      total.fallback_reasons.insert(total.fallback_reasons.end(), s.fallback_reasons.begin(),
                                    s.fallback_reasons.end());
    }
    nb::dict d;
    d["calls"] = total.calls;
    d["compiles"] = total.compiles;
    d["memory_hits"] = total.memory_hits;
    d["disk_hits"] = total.disk_hits;
    d["variants"] = total.variants;
    d["variant_limit_hits"] = total.variant_limit_hits;
    d["fallbacks"] = total.fallbacks;
    d["backend_kernels"] = total.backend_kernels;
    d["recompile_reasons"] = total.recompile_reasons;
    d["fallback_reasons"] = total.fallback_reasons;
    d["traces"] = static_cast<int64_t>(entries_.size());
    return d;
  }

  const std::string& name() const { return name_; }
  nb::object fn() const { return fn_; }

  // Garbage collection: a decorated function refers to its module's globals, which refer back to
  // the JitFunction, so the Python objects held here are visited and can be cleared.
  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(fn_.ptr());
    Py_VISIT(trace_helper_.ptr());
    Py_VISIT(static_index_.ptr());
    for (const auto& e : entries_) {
      Py_VISIT(e->static_key.ptr());
      Py_VISIT(e->static_values.ptr());
    }
    return 0;
  }
  void clear() {
    fn_ = nb::none();
    trace_helper_ = nb::none();
    static_index_.clear();
    for (auto& e : entries_) {
      e->static_key = nb::none();
      e->static_values = nb::list();
    }
  }

  // The TraceFn of every Function: calls the Python function with kiln.Tensor proxies.
  std::vector<Tensor> trace(Entry& e, const std::vector<Tensor>& inputs) {
    nb::gil_scoped_acquire gil;
    try {
      nb::list tensors;
      for (const Tensor& t : inputs) tensors.append(nb::cast(t));
      nb::object res = trace_helper_(fn_, tensors, e.nargs, e.static_pos, e.static_values,
                                     e.scalar_mask);
      clear_trace_loc();
      auto pair = nb::cast<nb::tuple>(res);
      e.single_output = nb::cast<bool>(pair[0]);
      return nb::cast<std::vector<Tensor>>(pair[1]);
    } catch (nb::python_error& err) {
      clear_trace_loc();
      std::string msg = nb::cast<std::string>(nb::str(err.value()));
      bool is_shape = err.matches(error_types().shape), is_dtype = err.matches(error_types().dtype),
           is_device = err.matches(error_types().device);
      std::string type_name = nb::cast<std::string>(nb::handle(err.type()).attr("__name__"));
      err.restore();
      tl_pending.clear();
      PyErr_Fetch(&tl_pending.type, &tl_pending.value, &tl_pending.tb);
      PyErr_NormalizeException(&tl_pending.type, &tl_pending.value, &tl_pending.tb);
      if (tl_pending.tb) PyException_SetTraceback(tl_pending.value, tl_pending.tb);
      // The traceback should end in the user's function: drop kiln's own frames.
      try {
        nb::object tb = nb::module_::import_("kiln._trace").attr("clean_exception")(
            nb::handle(tl_pending.value));
        Py_CLEAR(tl_pending.tb);
        if (!tb.is_none()) tl_pending.tb = tb.release().ptr();
      } catch (nb::python_error&) {
      }
      // Another thread waiting on this compile sees the C++ translation of the same error.
      if (is_shape) throw ShapeError(msg);
      if (is_dtype) throw DTypeError(msg);
      if (is_device) throw DeviceError(msg);
      throw Error("while tracing " + name_ + "(): " + type_name + ": " + msg);
    }
  }

 private:
  struct Prepared {
    Entry* entry = nullptr;
    std::vector<Array> inputs;
    std::vector<nb::object> keep;
    uint64_t scalars[8] = {};
    std::vector<uint64_t> more_scalars;
  };

  // Runs `body` (which calls into kiln) without the GIL; a Python exception raised while tracing
  // on this thread is re-raised as itself.
  template <typename Body>
  void run_guarded(Body&& body) {
    tl_pending.clear();
    try {
      nb::gil_scoped_release release;
      body();
    } catch (...) {
      if (tl_pending.value) {
        PyObject* t = tl_pending.type;
        PyObject* v = tl_pending.value;
        PyObject* tb = tl_pending.tb;
        tl_pending = PendingError{};
        PyErr_Restore(t, v, tb);  // steals
        throw nb::python_error();
      }
      throw;
    }
  }

  Prepared prepare(nb::args& args_in, nb::kwargs& kwargs) {
    nb::tuple args = args_in;
    if (kwargs.size() != 0) {  // slow path: bind keywords to positions in Python
      nb::object bind = nb::module_::import_("kiln._jit").attr("_bind_arguments");
      args = nb::cast<nb::tuple>(bind(fn_, args_in, kwargs));
    }
    size_t n = args.size();
    if (static_cast<int>(n) < min_args_ || (max_args_ >= 0 && static_cast<int>(n) > max_args_)) {
      std::string expected = max_args_ == min_args_ ? std::to_string(min_args_)
                             : max_args_ < 0         ? "at least " + std::to_string(min_args_)
                                             : "from " + std::to_string(min_args_) + " to " +
                                                   std::to_string(max_args_);
      throw nb::type_error((name_ + "() takes " + expected + " positional argument" +
                            (expected == "1" ? "" : "s") + " but " + std::to_string(n) +
                            (n == 1 ? " was" : " were") + " given")
                               .c_str());
    }
    Prepared p;
    p.inputs.reserve(n);
    if (n > 8) p.more_scalars.resize(n);
    uint64_t mask = 0;
    std::vector<int> static_pos;
    if (!static_argnums_.empty()) static_pos = static_positions(n);
    size_t next_static = 0;
    for (size_t i = 0; i < n; ++i) {
      if (next_static < static_pos.size() && static_pos[next_static] == static_cast<int>(i)) {
        ++next_static;
        continue;
      }
      uint64_t* slot = i < 8 ? &p.scalars[i] : &p.more_scalars[i];
      Array a;
      ArgKind kind = to_array(args[i].ptr(), a, p.keep, slot, ArgName{&name_, &param_names_, i});
      if (kind == ArgKind::python_scalar) {
        if (i >= 64)
          throw DTypeError(what(i) + ": Python numbers are taken as arguments 0 to 63 only; pass a numpy array");
        mask |= uint64_t{1} << i;
      }
      p.inputs.push_back(std::move(a));
    }
    p.entry = static_pos.empty() ? find_entry(n, mask) : find_static_entry(args, static_pos, n, mask);
    return p;
  }

  std::string what(size_t i) const { return ArgName{&name_, &param_names_, i}.str(); }

  std::vector<int> static_positions(size_t n) const {
    std::vector<int> pos;
    for (int s : static_argnums_) {
      int i = s < 0 ? s + static_cast<int>(n) : s;
      if (i < 0 || i >= static_cast<int>(n))
        throw nb::type_error((name_ + "(): static_argnums names argument " + std::to_string(s) +
                              " but " + std::to_string(n) + " arguments were given")
                                 .c_str());
      pos.push_back(i);
    }
    std::sort(pos.begin(), pos.end());
    pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
    return pos;
  }

  Entry* find_entry(size_t n, uint64_t mask) {
    for (const auto& e : entries_)
      if (e->nargs == n && e->scalar_mask == mask && e->static_key.is_none()) return e.get();
    return add_entry(n, mask, nb::none(), {}, nb::list());
  }

  Entry* find_static_entry(const nb::tuple& args, const std::vector<int>& pos, size_t n, uint64_t mask) {
    nb::list values;
    for (int i : pos) values.append(args[i]);
    nb::tuple key = nb::make_tuple(n, mask, nb::tuple(values));
    try {
      nb::hash(key);
    } catch (nb::python_error&) {
      for (int i : pos) {
        if (PyObject_Hash(args[i].ptr()) == -1) {
          PyErr_Clear();
          throw nb::type_error((what(i) + " is static (static_argnums) and must be hashable, got " +
                                Py_TYPE(args[i].ptr())->tp_name)
                                   .c_str());
        }
      }
      throw;
    }
    if (PyObject* hit = PyDict_GetItem(static_index_.ptr(), key.ptr()))  // borrowed
      return entries_[nb::cast<size_t>(nb::handle(hit))].get();
    Entry* e = add_entry(n, mask, key, pos, values);
    static_index_[key] = entries_.size() - 1;
    return e;
  }

  Entry* add_entry(size_t n, uint64_t mask, nb::object key, std::vector<int> pos, nb::list values) {
    auto e = std::make_unique<Entry>();
    e->nargs = n;
    e->scalar_mask = mask;
    e->static_key = std::move(key);
    e->static_pos = std::move(pos);
    e->static_values = std::move(values);
    Options opts = options_;
    // dynamic={arg: dims} is keyed by the full argument position; Function counts tensor inputs.
    for (const auto& [arg, dims] : dynamic_dims_) {
      int pos_in = arg < 0 ? arg + static_cast<int>(n) : arg;
      if (pos_in < 0 || pos_in >= static_cast<int>(n)) continue;
      if (std::find(e->static_pos.begin(), e->static_pos.end(), pos_in) != e->static_pos.end()) continue;
      int shift = static_cast<int>(std::count_if(e->static_pos.begin(), e->static_pos.end(),
                                                 [&](int s) { return s < pos_in; }));
      opts.dynamic_dims[pos_in - shift] = dims;
    }
    Entry* raw = e.get();
    int arity = static_cast<int>(n - e->static_pos.size());
    e->fn = std::make_unique<Function>(
        [this, raw](const std::vector<Tensor>& in) { return trace(*raw, in); }, arity, opts, name_);
    entries_.push_back(std::move(e));
    return raw;
  }

  nb::object wrap_outputs(const Entry& e, const std::vector<Array>& outs) {
    if (e.single_output && outs.size() == 1) return nb::steal(to_numpy(outs[0]));
    PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(outs.size()));
    if (!t) throw nb::python_error();
    nb::object tuple = nb::steal(t);
    for (size_t i = 0; i < outs.size(); ++i)
      PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), to_numpy(outs[i]));
    return tuple;
  }

  nb::object fn_;
  nb::object trace_helper_;
  Options options_;
  std::map<int, std::vector<int>> dynamic_dims_;
  std::vector<int> static_argnums_;
  int min_args_ = 0;
  int max_args_ = -1;
  std::vector<std::string> param_names_;
  std::string name_;
  std::vector<std::unique_ptr<Entry>> entries_;
  nb::dict static_index_;
};

int jit_function_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  return nb::inst_ptr<JitFunction>(self)->traverse(visit, arg);
}

int jit_function_clear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<JitFunction>(self)->clear();
  return 0;
}

PyType_Slot jit_function_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(jit_function_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(jit_function_clear)},
    {0, nullptr}};

}  // namespace

void init_jit(nb::module_& m) {
  nb::class_<KernelInfo>(m, "KernelInfo")
      .def_ro("name", &KernelInfo::name)
      .def_ro("backend", &KernelInfo::backend)
      .def_ro("key", &KernelInfo::key)
      .def_ro("asm", &KernelInfo::asm_text)
      .def_ro("source", &KernelInfo::source)
      .def_ro("ops", &KernelInfo::ops)
      .def("__repr__", [](const KernelInfo& k) {
        return "KernelInfo(name='" + k.name + "', backend='" + k.backend + "', key='" + k.key + "')";
      });
  nb::class_<Inspection>(m, "Inspection")
      .def_ro("graph", &Inspection::graph)
      .def_ro("kernels", &Inspection::kernels)
      .def("__repr__", [](const Inspection& i) {
        return "Inspection(" + std::to_string(i.kernels.size()) + " kernels)";
      });

  // kiln.JitFunction is a Python subclass (for __name__, __doc__, __wrapped__); calls stay in C++.
  nb::class_<JitFunction>(m, "JitFunctionBase", nb::type_slots(jit_function_slots))
      .def(nb::init<nb::object, nb::object, int, std::map<int, std::vector<int>>, std::string,
                    std::vector<int>, bool, int, int, std::vector<std::string>, std::string, int>(),
           nb::arg("fn"), nb::arg("trace_helper"), nb::arg("dynamic_mode"), nb::arg("dynamic_dims"),
           nb::arg("device"), nb::arg("static_argnums"), nb::arg("cache"), nb::arg("min_args"),
           nb::arg("max_args"), nb::arg("param_names"), nb::arg("name"), nb::arg("max_variants"))
      .def("__call__", &JitFunction::call)
      .def("inspect", &JitFunction::inspect,
           "Traces and compiles for these arguments (if needed) and returns a kiln.Inspection")
      .def("stats", &JitFunction::stats)
      .def_prop_ro("fn", &JitFunction::fn)

      .def("__repr__", [](const JitFunction& f) { return "<kiln.JitFunction " + f.name() + ">"; });
}

}  // namespace kiln::py
