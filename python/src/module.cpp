// kiln._kiln: the extension module. Creates kiln's Python exception types (with their two bases,
// e.g. kiln.ShapeError(kiln.Error, ValueError)), maps the C++ exceptions onto them, and exposes the
// module-level functions of API.md.
#include "common.h"

#include <nanobind/stl/string.h>

#include <sstream>

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

// doctor_report() as a dict: every "key: value" line becomes an entry; the full text is "report".
nb::dict device_info() {
  std::string text = doctor_report();
  nb::dict d;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto trim = [](std::string s) {
      size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key.empty()) continue;
    for (char& c : key) c = (c == ' ' || c == '-') ? '_' : static_cast<char>(std::tolower(c));
    d[key.c_str()] = value;
  }
  d["report"] = text;
  return d;
}

}  // namespace

const ErrorTypes& error_types() { return g_errors; }

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
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw nb::value_error(("set_num_threads: expected n >= 1, got " + std::to_string(n)).c_str());
    kiln::set_num_threads(n);
  });
}
