// Errors of kiln._kiln.JitFunction (jit.cpp): a Python exception raised while tracing is kept on
// the thread that traced, so that the caller gets the original exception and its traceback rather
// than the C++ translation kiln::Function passes on; and the exception in flight is set as the
// Python error where nanobind's wrappers do not run (the type's tp_call slot).
#pragma once

#include "common.h"

#include <string>

namespace kiln::py {

// In the trace callback's catch of `err` (GIL held): keeps the Python exception (its traceback
// cut to end in the user's function) and throws its kiln translation (ShapeError, DTypeError,
// DeviceError, or an Error naming the function `fn_name` and the exception type) for Function.
[[noreturn]] void keep_trace_error(nb::python_error& err, const std::string& fn_name);
// In a catch block of a call into kiln (GIL held): re-raises the kept Python exception of this
// thread's trace as itself when there is one, else rethrows the exception in flight.
[[noreturn]] void rethrow_trace_error();
// Drops this thread's kept exception (GIL held).
void forget_trace_error();
// Sets the Python error for the exception in flight, translated as nanobind would.
void set_error_from_current();

}  // namespace kiln::py
