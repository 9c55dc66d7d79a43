// The trace errors kept per thread, and the call slot's error translation (jit_errors.h).
#include "jit_errors.h"

#include <new>

namespace kiln::py {

namespace {

// The Python exception of this thread's last failed trace.
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

}  // namespace

void keep_trace_error(nb::python_error& err, const std::string& fn_name) {
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
    nb::object tb =
        nb::module_::import_("kiln._trace").attr("clean_exception")(nb::handle(tl_pending.value));
    Py_CLEAR(tl_pending.tb);
    if (!tb.is_none()) tl_pending.tb = tb.release().ptr();
  } catch (nb::python_error&) {
  }
  // Another thread waiting on this compile sees the C++ translation of the same error.
  if (is_shape) throw ShapeError(msg);
  if (is_dtype) throw DTypeError(msg);
  if (is_device) throw DeviceError(msg);
  throw Error("while tracing " + fn_name + "(): " + type_name + ": " + msg);
}

void rethrow_trace_error() {
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

void forget_trace_error() { tl_pending.clear(); }

// The JitFunction type's tp_call slot runs outside nanobind's function wrappers, so this
// translates what they would.
void set_error_from_current() {
  try {
    throw;
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    PyObject* type = PyExc_RuntimeError;
    switch (e.type()) {
      case nb::exception_type::type_error:
        type = PyExc_TypeError;
        break;
      case nb::exception_type::value_error:
        type = PyExc_ValueError;
        break;
      case nb::exception_type::index_error:
        type = PyExc_IndexError;
        break;
      case nb::exception_type::key_error:
        type = PyExc_KeyError;
        break;
      case nb::exception_type::attribute_error:
        type = PyExc_AttributeError;
        break;
      default:
        break;
    }
    PyErr_SetString(type, e.what());
  } catch (const Error&) {
    translate_kiln_error(std::current_exception());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "kiln: unknown C++ exception");
  }
}

}  // namespace kiln::py
