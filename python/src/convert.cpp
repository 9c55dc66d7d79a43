// numpy arrays (and __dlpack__ objects, numpy scalars, Python numbers) <-> kiln::Array.
// Inputs are borrowed, with their strides; outputs are numpy arrays whose base is a capsule that
// shares ownership of kiln's allocation, so neither direction copies.
#define PY_ARRAY_UNIQUE_SYMBOL kiln_py_ARRAY_API
#include <numpy/arrayobject.h>

#include "common.h"

#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <vector>

namespace kiln::py {

namespace {

int g_bf16_num = -1;                    // numpy type number of ml_dtypes.bfloat16
PyArray_Descr* g_bf16_descr = nullptr;  // strong reference, never released

const char* kSupported =
    "float32, float64, float16, bfloat16 (ml_dtypes), int8, int32, int64, bool";

bool dtype_from_numpy(int type_num, DType& out) {
  switch (type_num) {
    case NPY_FLOAT32:
      out = DType::f32;
      return true;
    case NPY_FLOAT64:
      out = DType::f64;
      return true;
    case NPY_FLOAT16:
      out = DType::f16;
      return true;
    case NPY_INT8:
      out = DType::i8;
      return true;
    case NPY_BOOL:
      out = DType::boolean;
      return true;
    default:
      break;
  }
  // int32 and int64 each have two type numbers on some platforms (int/long, long/longlong).
  if (type_num == NPY_INT || type_num == NPY_LONG || type_num == NPY_LONGLONG) {
    int size = type_num == NPY_INT    ? sizeof(int)
               : type_num == NPY_LONG ? sizeof(long)
                                      : sizeof(long long);
    if (size == 4) {
      out = DType::i32;
      return true;
    }
    if (size == 8) {
      out = DType::i64;
      return true;
    }
  }
  if (g_bf16_num >= 0 && type_num == g_bf16_num) {
    out = DType::bf16;
    return true;
  }
  return false;
}

// numpy's descriptors of the builtin dtypes are immortal singletons: look them up once.
PyArray_Descr* g_descr[8] = {};

PyArray_Descr* descr_for(DType t) {
  auto idx = static_cast<size_t>(t);
  if (idx < 8 && g_descr[idx]) {
    Py_INCREF(g_descr[idx]);
    return g_descr[idx];
  }
  switch (t) {
    case DType::f32:
      return PyArray_DescrFromType(NPY_FLOAT32);
    case DType::f64:
      return PyArray_DescrFromType(NPY_FLOAT64);
    case DType::f16:
      return PyArray_DescrFromType(NPY_FLOAT16);
    case DType::i8:
      return PyArray_DescrFromType(NPY_INT8);
    case DType::i32:
      return PyArray_DescrFromType(NPY_INT32);
    case DType::i64:
      return PyArray_DescrFromType(NPY_INT64);
    case DType::boolean:
      return PyArray_DescrFromType(NPY_BOOL);
    case DType::bf16:
      if (!g_bf16_descr)
        throw DTypeError(
            "kiln produced a bfloat16 result, but numpy has no bfloat16 dtype: "
            "install ml_dtypes (pip install ml_dtypes)");
      Py_INCREF(g_bf16_descr);
      return g_bf16_descr;
  }
  throw DTypeError("unknown kiln dtype");
}

std::string numpy_dtype_str(PyArrayObject* a) {
  PyObject* s = PyObject_Str(reinterpret_cast<PyObject*>(PyArray_DESCR(a)));
  if (!s) {
    PyErr_Clear();
    return "?";
  }
  std::string r = PyUnicode_AsUTF8(s);
  Py_DECREF(s);
  return r;
}

std::string type_name(PyObject* obj) { return Py_TYPE(obj)->tp_name; }

// A view over a numpy array, or false when the array needs a copy first (unaligned, byte-swapped,
// a stride that is not a whole number of elements).
bool view_of(PyArrayObject* a, DType dt, Array& out) {
  int nd = PyArray_NDIM(a);
  const npy_intp* dims = PyArray_DIMS(a);
  std::vector<int64_t> shape(dims, dims + nd);
  int flags = PyArray_FLAGS(a);
  if (!(flags & NPY_ARRAY_ALIGNED) || !PyArray_ISNOTSWAPPED(a)) return false;
  if (flags & NPY_ARRAY_C_CONTIGUOUS) {
    out = Array::view(PyArray_DATA(a), std::move(shape), dt);
    return true;
  }
  const npy_intp* st = PyArray_STRIDES(a);
  int64_t item = static_cast<int64_t>(dtype_size(dt));
  std::vector<int64_t> strides(nd);
  int64_t contiguous = 1;
  for (int i = nd - 1; i >= 0; --i) {
    // A dim of extent 0 or 1 is never stepped over: give it the row-major stride.
    if (dims[i] <= 1) {
      strides[i] = contiguous;
    } else {
      if (st[i] % item != 0) return false;
      strides[i] = st[i] / item;
    }
    contiguous *= dims[i] > 0 ? dims[i] : 1;
  }
  out = Array::view(PyArray_DATA(a), std::move(shape), dt, std::move(strides));
  return true;
}

ArgKind from_ndarray(PyArrayObject* a, Array& out, std::vector<nb::object>& keep,
                     const ArgName& arg) {
  DType dt;
  if (!dtype_from_numpy(PyArray_DESCR(a)->type_num, dt)) {
    std::string what = arg.str();
    std::string given = numpy_dtype_str(a);
    if (given == "bfloat16" && g_bf16_num < 0)
      throw DTypeError(what + ": bfloat16 arrays need ml_dtypes (pip install ml_dtypes)");
    throw DTypeError(what + ": unsupported dtype " + given + " (kiln takes " + kSupported + ")");
  }
  if (view_of(a, dt, out)) return ArgKind::array;
  std::string what = arg.str();
  // Rare layouts: copy once into an aligned, native-order, C-contiguous array.
  PyArray_Descr* native = PyArray_DescrNewByteorder(PyArray_DESCR(a), NPY_NATIVE);
  if (!native) throw nb::python_error();
  PyObject* copy = PyArray_FromArray(a, native, NPY_ARRAY_CARRAY | NPY_ARRAY_ENSURECOPY);  // steals
  if (!copy) throw nb::python_error();
  keep.push_back(nb::steal(copy));
  if (!view_of(reinterpret_cast<PyArrayObject*>(copy), dt, out))
    throw DTypeError(what + ": could not take a view of the array");
  return ArgKind::array;
}

}  // namespace

bool has_bfloat16() { return g_bf16_descr != nullptr; }

std::string ArgName::str() const {
  std::string s = "argument " + std::to_string(index);
  if (index < names->size() && !(*names)[index].empty()) s += " ('" + (*names)[index] + "')";
  return s + " of " + *fn_name + "()";
}

ArgKind to_array(PyObject* obj, Array& out, std::vector<nb::object>& keep, uint64_t* scalar_slot,
                 const ArgName& arg) {
  if (PyArray_Check(obj))
    return from_ndarray(reinterpret_cast<PyArrayObject*>(obj), out, keep, arg);
  // Python numbers are weakly typed 0-d inputs: bool, int64, float64 (see _tensor.py).
  if (PyBool_Check(obj)) {
    *reinterpret_cast<uint8_t*>(scalar_slot) = obj == Py_True;
    out = Array::view(scalar_slot, {}, DType::boolean);
    return ArgKind::python_scalar;
  }
  if (PyLong_CheckExact(obj) || (PyLong_Check(obj) && !PyArray_IsScalar(obj, Generic))) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow)
      throw DTypeError(arg.str() + ": Python int " + nb::str(nb::handle(obj)).c_str() +
                       " does not fit in int64");
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    *reinterpret_cast<int64_t*>(scalar_slot) = v;
    out = Array::view(scalar_slot, {}, DType::i64);
    return ArgKind::python_scalar;
  }
  if (PyFloat_CheckExact(obj) || (PyFloat_Check(obj) && !PyArray_IsScalar(obj, Generic))) {
    *reinterpret_cast<double*>(scalar_slot) = PyFloat_AsDouble(obj);
    out = Array::view(scalar_slot, {}, DType::f64);
    return ArgKind::python_scalar;
  }
  if (PyArray_IsScalar(obj, Generic)) {  // numpy scalars are strongly typed 0-d arrays
    PyObject* arr = PyArray_FromScalar(obj, nullptr);
    if (!arr) throw nb::python_error();
    keep.push_back(nb::steal(arr));
    return from_ndarray(reinterpret_cast<PyArrayObject*>(arr), out, keep, arg);
  }
  if (PyObject_HasAttrString(obj, "__dlpack__")) {
    nb::object np = nb::module_::import_("numpy");
    nb::object arr;
    try {
      arr = np.attr("from_dlpack")(nb::handle(obj));
    } catch (nb::python_error& e) {
      throw DTypeError(arg.str() + ": could not import the " + type_name(obj) +
                       " through __dlpack__ (kiln takes CPU arrays): " + e.what());
    }
    keep.push_back(arr);
    return from_ndarray(reinterpret_cast<PyArrayObject*>(arr.ptr()), out, keep, arg);
  }
  if (PyComplex_Check(obj))
    throw DTypeError(arg.str() + ": complex numbers are not supported (kiln takes " + kSupported +
                     ")");
  throw DTypeError(arg.str() +
                   ": expected a numpy array, an object with __dlpack__ or a Python number, got " +
                   type_name(obj));
}

PyObject* new_numpy(DType dtype, const std::vector<int64_t>& shape) {
  PyArray_Descr* descr = descr_for(dtype);  // stolen below
  npy_intp dims[NPY_MAXDIMS];
  int nd = static_cast<int>(shape.size());
  if (nd > NPY_MAXDIMS) {
    Py_DECREF(descr);
    throw ShapeError("kiln: a result has " + std::to_string(nd) + " dims; numpy takes at most " +
                     std::to_string(NPY_MAXDIMS));
  }
  for (int i = 0; i < nd; ++i) dims[i] = static_cast<npy_intp>(shape[i]);
  PyObject* arr =
      PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, nullptr, nullptr, 0, nullptr);
  if (!arr) throw nb::python_error();
  return arr;
}

namespace {

// Large results come from this pool: a freed result's block (its numpy array died) is kept and
// handed to the next result of the same size class, so a serving loop does not mmap, fault in and
// unmap tens of megabytes per call (glibc serves such sizes with fresh mmaps: layer_norm of
// (8192, 1024) ran 28 ms instead of 11). Touched only with the GIL held (allocation before the
// kernels run; release from the capsule destructor).
constexpr size_t kPoolMinBytes = 256 * 1024;
constexpr size_t kPoolMaxBytes = size_t{256} << 20;  // cached, not in use
constexpr size_t kPoolMaxPerClass = 4;

struct Pool {
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by size class
  size_t cached = 0;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: capsules may die during interpreter shutdown
  return *p;
}

size_t size_class(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

struct PooledBlock {
  void* data;
  size_t bytes;  // size class
};

void pool_release(PyObject* cap) {
  auto* b = static_cast<PooledBlock*>(PyCapsule_GetPointer(cap, "kiln.pooled"));
  Pool& p = pool();
  auto& list = p.free_blocks[b->bytes];
  if (list.size() < kPoolMaxPerClass && p.cached + b->bytes <= kPoolMaxBytes) {
    list.push_back(b->data);
    p.cached += b->bytes;
  } else {
    std::free(b->data);
  }
  delete b;
}

}  // namespace

bool poolable(size_t bytes) { return bytes >= kPoolMinBytes; }

PyObject* new_pooled_numpy(DType dtype, const std::vector<int64_t>& shape, size_t bytes) {
  size_t cls = size_class(bytes);
  void* data = nullptr;
  Pool& p = pool();
  auto it = p.free_blocks.find(cls);
  if (it != p.free_blocks.end() && !it->second.empty()) {
    data = it->second.back();
    it->second.pop_back();
    p.cached -= cls;
  } else {
    data = std::aligned_alloc(64, cls);
    if (!data) throw std::bad_alloc();
  }
  auto* block = new PooledBlock{data, cls};
  PyObject* cap = PyCapsule_New(block, "kiln.pooled", pool_release);
  if (!cap) {
    std::free(data);
    delete block;
    throw nb::python_error();
  }
  PyArray_Descr* descr = descr_for(dtype);  // stolen below
  npy_intp dims[NPY_MAXDIMS];
  int nd = static_cast<int>(shape.size());
  for (int i = 0; i < nd && i < NPY_MAXDIMS; ++i) dims[i] = static_cast<npy_intp>(shape[i]);
  PyObject* arr = nd > NPY_MAXDIMS ? nullptr
                                   : PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, nullptr,
                                                          data, NPY_ARRAY_CARRAY, nullptr);
  if (!arr) {
    if (nd > NPY_MAXDIMS) Py_DECREF(descr);
    Py_DECREF(cap);
    if (nd > NPY_MAXDIMS) throw ShapeError("kiln: a result has more dims than numpy takes");
    throw nb::python_error();
  }
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), cap) < 0) {  // steals cap
    Py_DECREF(arr);
    throw nb::python_error();
  }
  return arr;
}

void* numpy_data(PyObject* arr) { return PyArray_DATA(reinterpret_cast<PyArrayObject*>(arr)); }

size_t numpy_nbytes(PyObject* obj) {
  return PyArray_Check(obj)
             ? static_cast<size_t>(PyArray_NBYTES(reinterpret_cast<PyArrayObject*>(obj)))
             : 0;
}

PyObject* to_numpy(const Array& a) {
  PyArray_Descr* descr = descr_for(a.dtype());  // new reference, stolen below
  int nd = static_cast<int>(a.ndim());
  if (nd > NPY_MAXDIMS) {
    Py_DECREF(descr);
    throw ShapeError("kiln: a result has " + std::to_string(nd) + " dims; numpy takes at most " +
                     std::to_string(NPY_MAXDIMS));
  }
  npy_intp dims[NPY_MAXDIMS], strides[NPY_MAXDIMS];
  const std::vector<int64_t>& st = a.strides();
  int64_t item = static_cast<int64_t>(dtype_size(a.dtype()));
  int64_t acc = 1;
  for (int i = nd - 1; i >= 0; --i) {
    dims[i] = static_cast<npy_intp>(a.shape()[i]);
    strides[i] = static_cast<npy_intp>((st.empty() ? acc : st[i]) * item);
    acc *= a.shape()[i];
  }
  PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, strides, a.data(),
                                       NPY_ARRAY_WRITEABLE, nullptr);
  if (!arr) throw nb::python_error();
  if (!a.owner()) {  // borrowed: the caller's buffer may go away, so copy
    PyObject* copy = PyArray_NewCopy(reinterpret_cast<PyArrayObject*>(arr), NPY_CORDER);
    Py_DECREF(arr);
    if (!copy) throw nb::python_error();
    return copy;
  }
  auto* owner = new std::shared_ptr<void>(a.owner());
  PyObject* cap = PyCapsule_New(owner, "kiln.array", [](PyObject* c) {
    delete static_cast<std::shared_ptr<void>*>(PyCapsule_GetPointer(c, "kiln.array"));
  });
  if (!cap) {
    delete owner;
    Py_DECREF(arr);
    throw nb::python_error();
  }
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), cap) < 0) {  // steals cap
    Py_DECREF(arr);
    throw nb::python_error();
  }
  return arr;
}

void init_numpy(nb::module_& m) {
  if (_import_array() < 0) throw nb::python_error();
  for (DType t :
       {DType::f32, DType::f64, DType::f16, DType::i8, DType::i32, DType::i64, DType::boolean})
    if (static_cast<size_t>(t) < 8) g_descr[static_cast<size_t>(t)] = descr_for(t);  // kept
  try {
    nb::object ml = nb::module_::import_("ml_dtypes");
    nb::object np = nb::module_::import_("numpy");
    nb::object d = np.attr("dtype")(ml.attr("bfloat16"));
    g_bf16_descr = reinterpret_cast<PyArray_Descr*>(d.release().ptr());
    g_bf16_num = g_bf16_descr->type_num;
  } catch (nb::python_error&) {
    // No ml_dtypes: bfloat16 arrays cannot cross into numpy; a clear DTypeError says so.
  }
  m.attr("has_bfloat16") = nb::bool_(g_bf16_descr != nullptr);
}

}  // namespace kiln::py
