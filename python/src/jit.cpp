// kiln._kiln.JitFunction: what @kiln.jit returns. A call (the type's tp_call) converts its
// arguments to kiln::Array views, picks the kiln::Function for this arity / Python-scalar pattern /
// static values, runs it and returns numpy arrays: one C++ call, no Python-level loop. Known
// signatures take Function::call with results allocated here (numpy's allocator when small, a
// pool of reused blocks when large); the GIL is kept for calls under kKeepGilBelowBytes and
// released otherwise. On a cache miss kiln::Function calls back into Python
// (kiln._trace.run_trace). The per-trace state is jit_entry.h's Entry; errors raised while tracing
// are kept and re-raised by jit_errors.h.
#include "common.h"
#include "jit_entry.h"
#include "jit_errors.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::py {

void clear_trace_loc();  // tensor.cpp

namespace {

// Calls whose inputs plus outputs total fewer bytes than this keep the GIL while the kernels run.
// Releasing and re-acquiring it costs ~0.1-0.2 us (more when other threads wait for it), which is
// the whole budget of a small call; below 64 KiB a kernel runs for at most a few microseconds
// (elementwise at several GB/s per thread), so other Python threads wait at most that long. Larger
// calls, and every call that may compile, release it: Python threads calling kiln run in parallel.
constexpr size_t kKeepGilBelowBytes = 64 * 1024;

// Python scalars passed as arguments are 0-d inputs viewing these slots; 64-byte aligned so that
// the signature (which records the alignment of each data pointer) does not depend on the stack.
struct alignas(64) ScalarSlot {
  uint64_t bits = 0;
};
constexpr size_t kInlineArgs = 8;

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

  // The whole per-call path (the type's tp_call): arguments -> kiln::Array views on the stack,
  // entry lookup, known-signature check, outputs allocated here (known) or by kiln (first call
  // of a signature), kernels run with or without the GIL (kKeepGilBelowBytes), numpy out.
  PyObject* call(PyObject* args_in, PyObject* kwargs) {
    nb::object bound;
    PyObject* args = args_in;
    if (kwargs &&
        PyDict_GET_SIZE(kwargs) != 0) {  // slow path: bind keywords to positions in Python
      bound = bind_keywords(args_in, kwargs);
      args = bound.ptr();
    }
    size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
    check_count(n);
    if (!static_argnums_.empty() || n > kInlineArgs) return call_general(args);

    ScalarSlot scalars[kInlineArgs];
    Array inputs[kInlineArgs];
    std::vector<nb::object> keep;
    uint64_t mask = 0;
    size_t in_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      PyObject* obj = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(i));
      ArgKind kind =
          to_array(obj, inputs[i], keep, &scalars[i].bits, ArgName{&name_, &param_names_, i});
      if (kind == ArgKind::python_scalar) mask |= uint64_t{1} << i;
      in_bytes += numpy_nbytes(obj);
    }
    Entry* e = find_entry(n, mask);
    return run_bounded(*e, args, std::span<const Array>(inputs, n), in_bytes);
  }

  // run(), with the Python int arguments checked against the ranges their traces cast them to:
  // before the call when they are known, and after it when this call traced (its result, computed
  // from a wrapped value, is dropped).
  PyObject* run_bounded(Entry& e, PyObject* args, std::span<const Array> in, size_t in_bytes) {
    check_scalar_bounds(e, args, in);
    const uint64_t version = e.scalar_bounds_version;
    PyObject* res = run(e, in, in_bytes);
    if (e.scalar_bounds_version != version) {
      try {
        check_scalar_bounds(e, args, in);
      } catch (...) {
        Py_XDECREF(res);
        throw;
      }
    }
    return res;
  }

  void check_scalar_bounds(const Entry& e, PyObject* args, std::span<const Array> in) const {
    for (const Entry::ScalarBound& b : e.scalar_bounds) {
      if (b.inputs.size() != in.size()) continue;
      bool same = true;
      for (size_t i = 0; i < in.size() && same; ++i) same = b.inputs[i] == in[i].dtype();
      if (!same) continue;
      if (!b.expr.is_none()) {
        PyObject* passed = PyObject_CallOneArg(b.fast.ptr(), args);
        if (!passed) throw nb::python_error();
        const int ok = PyObject_IsTrue(passed);
        Py_DECREF(passed);
        if (ok < 0) throw nb::python_error();
        if (ok) continue;
        // Raises OverflowError naming the arguments and the value.
        if (!check_expr_) check_expr_ = nb::module_::import_("kiln._scalar_expr").attr("check");
        check_expr_(b.expr, b.lo, b.hi, b.dtype, nb::handle(args), name_, param_names_);
        continue;
      }
      PyObject* obj = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(b.arg));
      if (!PyLong_Check(obj) || PyBool_Check(obj)) continue;  // a float or bool this call
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (!overflow && v >= b.lo && v <= b.hi) continue;
      const std::string text = nb::cast<std::string>(nb::str(nb::handle(obj)));
      std::string msg;
      if (b.m.equal(nb::int_(1)) && b.c.equal(nb::int_(0))) {
        msg = what(b.arg) + ": Python integer " + text + " out of bounds for " + b.dtype +
              " (the dtype it takes beside an " + b.dtype + " tensor, as in numpy)";
      } else {  // a value computed from it, as numpy computes it: with Python ints
        const auto str = [](nb::handle h) { return nb::cast<std::string>(nb::str(h)); };
        const bool minus = b.c < nb::int_(0);
        const std::string value = str(b.m * nb::handle(obj) + b.c);
        msg = what(b.arg) + " is " + text + ", which makes " + str(b.m) + " * " + text +
              (minus ? " - " + str(nb::int_(0) - b.c) : " + " + str(b.c)) + " = " + value +
              (b.dtype == "int64"
                   ? ": Python integer " + value +
                         " out of bounds for int64, the dtype kiln computes it in (numpy computes "
                         "it exactly, and raises OverflowError beside an int64 tensor)"
                   : " beside an " + b.dtype + " tensor: Python integer " + value +
                         " out of bounds for " + b.dtype + " (as in numpy)");
      }
      PyErr_SetString(PyExc_OverflowError, msg.c_str());
      throw nb::python_error();
    }
  }

  // Runs one call of `e`; inputs are views (valid while the caller holds its arguments).
  PyObject* run(Entry& e, std::span<const Array> in, size_t in_bytes) {
    if (const Entry::Known* k = find_known(e, in)) {
      size_t nout = k->out.size();
      if (nout <= 4 && in_bytes + k->out_bytes < kKeepGilBelowBytes) {
        // Small: numpy allocates the results (from its small-block cache), kiln writes into them
        // with the GIL held, and the numpy arrays are returned as they are.
        PyObject* res[4] = {};
        Array outs[4];
        auto drop = [&] {
          for (PyObject*& r : res) Py_CLEAR(r);
        };
        try {
          for (size_t i = 0; i < nout; ++i) {
            res[i] = new_numpy(k->out[i].dtype, k->out[i].shape);
            outs[i] = Array::view(numpy_data(res[i]), k->out[i].shape, k->out[i].dtype);
          }
          e.fn->call(in, std::span<Array>(outs, nout));
        } catch (...) {
          drop();
          throw;
        }
        if (e.single_output && nout == 1) return res[0];
        PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(nout));
        if (!t) {
          drop();
          throw nb::python_error();
        }
        for (size_t i = 0; i < nout; ++i) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), res[i]);
        return t;
      }
      // Larger: pooled 64-byte aligned blocks from 256 KiB up (else numpy's allocation), GIL
      // released.
      std::vector<Array> outs(nout);
      std::vector<nb::object> res(nout);
      for (size_t i = 0; i < nout; ++i) {
        const Entry::OutKey& o = k->out[i];
        res[i] = nb::steal(poolable(o.bytes) ? new_pooled_numpy(o.dtype, o.shape, o.bytes)
                                             : new_numpy(o.dtype, o.shape));
        outs[i] = Array::view(numpy_data(res[i].ptr()), o.shape, o.dtype);
      }
      run_guarded([&] { e.fn->call(in, std::span<Array>(outs)); });
      if (e.single_output && nout == 1) return res[0].release().ptr();
      PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(nout));
      if (!t) throw nb::python_error();
      for (size_t i = 0; i < nout; ++i)
        PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), res[i].release().ptr());
      return t;
    }
    // First call of this signature in this process (or one the extension does not remember): the
    // allocating call, which may trace (calling back into Python) and compile: GIL released.
    std::vector<Array> in_vec(in.begin(), in.end());
    std::vector<Array> outs;
    run_guarded([&] { outs = (*e.fn)(in_vec); });
    remember(e, in, outs);
    return wrap_outputs(e, outs);
  }

  Inspection inspect(nb::args args, nb::kwargs kwargs) {
    Prepared p = prepare(args, kwargs.size() ? kwargs.ptr() : nullptr);
    Inspection result;
    run_guarded([&] { result = p.entry->fn->inspect(p.inputs); });
    return result;
  }

  nb::dict stats() const { return stats_of(entries_); }

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
    forget_trace_error();
    try {
      nb::list tensors;
      for (const Tensor& t : inputs) tensors.append(nb::cast(t));
      nb::object res =
          trace_helper_(fn_, tensors, e.nargs, e.static_pos, e.static_values, e.scalar_mask);
      clear_trace_loc();
      auto pair = nb::cast<nb::tuple>(res);
      e.single_output = nb::cast<bool>(pair[0]);
      add_scalar_bounds(e, pair[2], inputs);
      return nb::cast<std::vector<Tensor>>(pair[1]);
    } catch (nb::python_error& err) {
      clear_trace_loc();
      keep_trace_error(err, name_);
    }
  }

 private:
  struct Prepared {
    Entry* entry = nullptr;
    std::vector<Array> inputs;
    std::vector<nb::object> keep;
    std::vector<ScalarSlot> scalars;
    size_t in_bytes = 0;
  };

  // Static arguments, or more than kInlineArgs arguments.
  PyObject* call_general(PyObject* args) {
    Prepared p = prepare_tuple(nb::borrow<nb::tuple>(args));
    return run_bounded(*p.entry, args, p.inputs, p.in_bytes);
  }

  nb::object bind_keywords(PyObject* args, PyObject* kwargs) {
    nb::object bind = nb::module_::import_("kiln._jit").attr("_bind_arguments");
    return bind(fn_, nb::handle(args), nb::handle(kwargs));
  }

  void check_count(size_t n) const {
    if (static_cast<int>(n) < min_args_ || (max_args_ >= 0 && static_cast<int>(n) > max_args_)) {
      std::string expected = max_args_ == min_args_ ? std::to_string(min_args_)
                             : max_args_ < 0        ? "at least " + std::to_string(min_args_)
                                                    : "from " + std::to_string(min_args_) + " to " +
                                                   std::to_string(max_args_);
      throw nb::type_error((name_ + "() takes " + expected + " positional argument" +
                            (expected == "1" ? "" : "s") + " but " + std::to_string(n) +
                            (n == 1 ? " was" : " were") + " given")
                               .c_str());
    }
  }

  // Runs `body` (which calls into kiln) without the GIL; a Python exception raised while tracing
  // on this thread is re-raised as itself.
  template <typename Body>
  void run_guarded(Body&& body) {
    try {
      nb::gil_scoped_release release;
      body();
    } catch (...) {
      rethrow_trace_error();
    }
    // A trace error the call recovered from (a symbolic trace that failed, the dim then kept
    // exact) is not this call's error, nor a later one's.
    forget_trace_error();
  }

  Prepared prepare(nb::args& args_in, PyObject* kwargs) {
    if (kwargs) return prepare_tuple(nb::cast<nb::tuple>(bind_keywords(args_in.ptr(), kwargs)));
    return prepare_tuple(args_in);
  }

  Prepared prepare_tuple(nb::tuple args) {
    size_t n = args.size();
    check_count(n);
    Prepared p;
    p.inputs.reserve(n);
    p.scalars.resize(n);  // no reallocation below: the views point into it
    uint64_t mask = 0;
    std::vector<int> static_pos;
    if (!static_argnums_.empty()) static_pos = static_positions(n);
    size_t next_static = 0;
    for (size_t i = 0; i < n; ++i) {
      if (next_static < static_pos.size() && static_pos[next_static] == static_cast<int>(i)) {
        ++next_static;
        continue;
      }
      Array a;
      ArgKind kind =
          to_array(args[i].ptr(), a, p.keep, &p.scalars[i].bits, ArgName{&name_, &param_names_, i});
      if (kind == ArgKind::python_scalar) {
        if (i >= 64)
          throw DTypeError(
              what(i) + ": Python numbers are taken as arguments 0 to 63 only; pass a numpy array");
        mask |= uint64_t{1} << i;
      }
      p.in_bytes += numpy_nbytes(args[i].ptr());
      p.inputs.push_back(std::move(a));
    }
    p.entry =
        static_pos.empty() ? find_entry(n, mask) : find_static_entry(args, static_pos, n, mask);
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

  Entry* find_static_entry(const nb::tuple& args, const std::vector<int>& pos, size_t n,
                           uint64_t mask) {
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
      if (std::find(e->static_pos.begin(), e->static_pos.end(), pos_in) != e->static_pos.end())
        continue;
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

  PyObject* wrap_outputs(const Entry& e, std::span<const Array> outs) {
    if (e.single_output && outs.size() == 1) return to_numpy(outs[0]);
    PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(outs.size()));
    if (!t) throw nb::python_error();
    nb::object tuple = nb::steal(t);
    for (size_t i = 0; i < outs.size(); ++i)
      PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), to_numpy(outs[i]));
    return tuple.release().ptr();
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
  mutable nb::object check_expr_;  // kiln._scalar_expr.check, once an expression is checked
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

// JitFunction.__call__ as the type's tp_call: no nanobind argument parsing, no kwargs dict, no
// method lookup; kiln.JitFunction (the Python subclass) inherits the slot.
PyObject* jit_function_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  // Made by __new__ alone (or a subclass whose __init__ skipped the base's): no state to call.
  if (!nb::inst_ready(self)) {
    PyErr_Format(PyExc_TypeError,
                 "kiln: this %s was never initialized (construct it with "
                 "kiln.jit, or call the base __init__ from a subclass's)",
                 Py_TYPE(self)->tp_name);
    return nullptr;
  }
  try {
    return nb::inst_ptr<JitFunction>(self)->call(args, kwargs);
  } catch (...) {
    set_error_from_current();
    return nullptr;
  }
}

PyType_Slot jit_function_slots[] = {
    {Py_tp_call, reinterpret_cast<void*>(jit_function_call)},
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
        return "KernelInfo(name='" + k.name + "', backend='" + k.backend + "', key='" + k.key +
               "')";
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
      .def("inspect", &JitFunction::inspect,
           "Traces and compiles for these arguments (if needed) and returns a kiln.Inspection")
      .def("stats", &JitFunction::stats)
      .def_prop_ro("fn", &JitFunction::fn)

      .def("__repr__", [](const JitFunction& f) { return "<kiln.JitFunction " + f.name() + ">"; });
}

}  // namespace kiln::py
