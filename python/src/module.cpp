// kiln._kiln: the extension module. Creates kiln's Python exception types (with their two bases,
// e.g. kiln.ShapeError(kiln.Error, ValueError)), maps the C++ exceptions onto them, and exposes the
// module-level functions of API.md.
#include "common.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace kiln::py {

namespace {

ErrorTypes g_errors;

PyObject* new_error(const char* name, PyObject* base, PyObject* builtin, const char* doc) {
  PyObject* bases = builtin ? PyTuple_Pack(2, base, builtin) : PyTuple_Pack(1, base);
  if (!bases) throw nb::python_error();
  PyObject* t = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  Py_DECREF(bases);
  if (!t) throw nb::python_error();
  return t;  // kept for the life of the process
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ShapeError& e) {
    PyErr_SetString(g_errors.shape, e.what());
  } catch (const DTypeError& e) {
    PyErr_SetString(g_errors.dtype, e.what());
  } catch (const CompileError& e) {
    PyErr_SetString(g_errors.compile, e.what());
  } catch (const DeviceError& e) {
    PyErr_SetString(g_errors.device, e.what());
  } catch (const Error& e) {
    PyErr_SetString(g_errors.error, e.what());
  }
}

// kiln::device_info() as a dict (API.md: CPU features, cache sizes, GPUs); "report" keeps the
// text of `kiln doctor`.
nb::dict device_info() {
  kiln::DeviceInfo info;
  {
    nb::gil_scoped_release release;  // probing GPUs may load the CUDA driver
    info = kiln::device_info();
  }
  nb::dict d;
  d["cpu_brand"] = info.cpu_brand;
  d["isa"] = info.isa;
  d["cpu_features"] = info.cpu_features;
  d["cpu_features_hardware"] = info.cpu_features_hardware;
  d["num_cores"] = info.num_cores;
  d["num_threads"] = info.num_threads;
  d["l1d_bytes"] = info.l1d_bytes;
  d["l2_bytes"] = info.l2_bytes;
  d["l3_bytes"] = info.l3_bytes;
  nb::list gpus;
  for (const kiln::GpuInfo& g : info.gpus) {
    nb::dict gd;
    gd["name"] = g.name;
    gd["compute_capability"] = nb::make_tuple(g.compute_major, g.compute_minor);
    gd["memory_bytes"] = g.memory_bytes;
    gpus.append(gd);
  }
  d["gpus"] = gpus;
  d["gpu_status"] = info.gpu_status;
  // None where kiln was built without LLVM.
  d["llvm"] = info.llvm_version.empty() ? nb::none() : nb::cast(info.llvm_version);
  d["report"] = kiln::doctor_report();
  return d;
}

}  // namespace

const ErrorTypes& error_types() { return g_errors; }

void translate_kiln_error(const std::exception_ptr& p) { translate(p, nullptr); }

}  // namespace kiln::py

NB_MODULE(_kiln, m) {
  using namespace kiln::py;
  m.doc() = "kiln's native extension (use the kiln package, not this module)";
  g_errors.error = new_error("kiln.Error", PyExc_Exception, nullptr, "Base of every kiln error.");
  g_errors.shape = new_error("kiln.ShapeError", g_errors.error, PyExc_ValueError,
                             "A shape that does not fit (also a ValueError).");
  g_errors.dtype = new_error("kiln.DTypeError", g_errors.error, PyExc_TypeError,
                             "An unsupported or mismatched dtype (also a TypeError).");
  g_errors.compile = new_error("kiln.CompileError", g_errors.error, PyExc_RuntimeError,
                               "Code generation failed (also a RuntimeError).");
  g_errors.device = new_error("kiln.DeviceError", g_errors.error, PyExc_RuntimeError,
                              "The requested device is missing or failed (also a RuntimeError).");
  m.attr("Error") = nb::borrow(g_errors.error);
  m.attr("ShapeError") = nb::borrow(g_errors.shape);
  m.attr("DTypeError") = nb::borrow(g_errors.dtype);
  m.attr("CompileError") = nb::borrow(g_errors.compile);
  m.attr("DeviceError") = nb::borrow(g_errors.device);
  nb::register_exception_translator(translate);

  init_numpy(m);
  init_tensor(m);
  init_jit(m);

  m.def("cache_dir", [] { return kiln::cache_dir(); });
  m.def("clear_cache", [] {
    nb::gil_scoped_release release;
    kiln::clear_cache();
  });
  m.def("device_info", &device_info);
  m.def("doctor_report", [] { return kiln::doctor_report(); });
  // kiln.set_num_threads (__init__.py) checks the type and range first: a C int cannot hold
  // every Python int, and nanobind's own message would not name the argument.
  m.def("set_num_threads", &kiln::set_num_threads);
  m.attr("max_threads") = kiln::kMaxThreads;
}
