// Shared declarations of the kiln._kiln extension: the exception types, numpy <-> kiln::Array
// conversion, and the registration functions of each binding file.
#pragma once

#include <nanobind/nanobind.h>

#include <kiln/kiln.h>

#include <cstdint>
#include <exception>
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

// Sets the Python error for a kiln::Error (and its subclasses) in `p`.
void translate_kiln_error(const std::exception_ptr& p);

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
// `scalar_slot` is storage for a Python scalar's value. Throws kiln::DTypeError naming the
// argument.
ArgKind to_array(PyObject* obj, kiln::Array& out, std::vector<nb::object>& keep,
                 uint64_t* scalar_slot, const ArgName& what);

// A numpy array over `a` that owns (shares) its memory; copies only a borrowed array. New
// reference.
PyObject* to_numpy(const kiln::Array& a);

// A new C-contiguous numpy array of `dtype` and `shape` whose data numpy allocates (its small
// allocations come from numpy's own cache: cheaper than a 64-byte aligned malloc). New reference.
PyObject* new_numpy(kiln::DType dtype, const std::vector<int64_t>& shape);

// Results of at least this many bytes come from a pool of blocks that dead results gave back (no
// mmap and page faults per call). new_pooled_numpy: such a numpy array, 64-byte aligned. GIL held.
bool poolable(size_t bytes);
PyObject* new_pooled_numpy(kiln::DType dtype, const std::vector<int64_t>& shape, size_t bytes);

// The data pointer of a numpy array made by new_numpy or new_pooled_numpy.
void* numpy_data(PyObject* arr);

// Bytes of a numpy array argument (0 for anything else): the GIL policy of a call sums these.
size_t numpy_nbytes(PyObject* obj);

// True when ml_dtypes' bfloat16 is available to numpy.
bool has_bfloat16();

void init_numpy(nb::module_& m);
void init_tensor(nb::module_& m);
void init_jit(nb::module_& m);

}  // namespace kiln::py
