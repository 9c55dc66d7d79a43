// Shared declarations of the kiln._kiln extension: the exception types, numpy <-> kiln::Array
// conversion, and the registration functions of each binding file.
#pragma once

#include <nanobind/nanobind.h>

#include <kiln/kiln.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace kiln::py {

// Python exception types (kiln.Error, kiln.ShapeError, ...), created once at import.
struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* shape = nullptr;
  PyObject* dtype = nullptr;
  PyObject* compile = nullptr;
  PyObject* device = nullptr;
};
const ErrorTypes& error_types();

// --- numpy interop (convert.cpp) ---------------------------------------------------------------

// What kind of Python object an argument was (Python scalars are weakly typed, see _tensor.py).
enum class ArgKind : uint8_t { array, python_scalar };

// Names an argument in error messages ("argument 2 ('w') of block()"); built only on an error.
struct ArgName {
  const std::string* fn_name;
  const std::vector<std::string>* names;
  size_t index;
  std::string str() const;
};

// Converts one call argument to a borrowed kiln::Array without copying where possible. `keep`
// receives any temporary Python object (a dlpack import, a copy) that must outlive the call;
// `scalar_slot` is storage for a Python scalar's value. Throws kiln::DTypeError naming the argument.
ArgKind to_array(PyObject* obj, kiln::Array& out, std::vector<nb::object>& keep,
                 uint64_t* scalar_slot, const ArgName& what);

// A numpy array over `a` that owns (shares) its memory; copies only a borrowed array. New reference.
PyObject* to_numpy(const kiln::Array& a);

// True when ml_dtypes' bfloat16 is available to numpy.
bool has_bfloat16();


void init_numpy(nb::module_& m);
void init_tensor(nb::module_& m);
void init_jit(nb::module_& m);

}  // namespace kiln::py
