"""kiln.Tensor: the value a traced function computes with.

It wraps a ``_kiln.TensorImpl`` (a C++ ``kiln::Tensor``) and adds what is Python's: operators,
numpy-style weak promotion of Python numbers, numpy arrays as constants, basic indexing, and the
user's file:line on every recorded op (and on every error raised while tracing).
"""

import operator
import os
import sys

import numpy as np

from . import _dtypes, _kiln, _scalar_expr

_ops = _kiln.ops
_KILN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


# --- source locations and errors -----------------------------------------------------------------


def _user_location() -> str:
    """file:line of the innermost frame outside the kiln package (the user's op)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_KILN_DIR):
        f = f.f_back
    if f is None:
        return ""
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def _call(fn, *args):
    """Calls a traced C++ op with the user's location recorded; a kiln error names that line."""
    loc = _user_location()
    _ops.set_loc(loc)
    try:
        return fn(*args)
    except _kiln.Error as e:
        msg = str(e)
        if loc and loc not in msg:
            msg = f"{loc}: {msg}"
        raise type(e)(msg) from None


class SymbolicDim:
    """A dim that is symbolic in this trace (dynamic shapes); prints its name."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    __str__ = __repr__

    # Comparisons the variant's guards make sound: a symbol equals itself (its extent is the same
    # wherever it occurs) and is never 0 or 1 (those extents take exact variants). Anything else
    # (another symbol, another int) depends on the call: it raises, and the dim is kept exact.
    # (Python derives != from this.)
    def __eq__(self, other):
        if isinstance(other, SymbolicDim) and other.name == self.name:
            return True
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool) and other in (0, 1):
            return False
        if isinstance(other, (SymbolicDim, int, np.integer)):
            raise _kiln.ShapeError(
                f"comparing symbolic dim {self.name} with {other!r} depends on the call's "
                "extents; the dim is kept exact"
            )
        return False  # not a dim at all

    def __hash__(self):
        return hash(("kiln.SymbolicDim", self.name))

    def __index__(self):
        raise _kiln.ShapeError(
            f"dim {self.name} is symbolic in this trace and has no integer value; use -1 in "
            "reshape, or decorate with @kiln.jit(dynamic=False)"
        )


def _parse_shape_names(shape_str, ndim):
    s = shape_str.strip().strip("()[]")
    parts = [p.strip() for p in s.split(",") if p.strip()]
    return parts if len(parts) == ndim else ["?"] * ndim


# --- operands --------------------------------------------------------------------------------------


def _constant(value) -> "Tensor":
    """A numpy array (or numpy scalar) as a constant of the trace (strongly typed)."""
    arr = np.asarray(value)
    if not arr.dtype.isnative:  # before its name: '>f4' is float32 once in this machine's order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    name = _dtypes.name_of(arr.dtype)
    arr = np.ascontiguousarray(arr)
    return Tensor(_call(_ops.constant, arr.tobytes(), list(arr.shape), name))


def _is_python_number(x):
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _weak_scalar(value, other: "Tensor | None") -> "Tensor":
    """A Python number next to `other`, promoted as numpy does for Python scalars (NEP 50)."""
    if isinstance(value, bool):
        default, cat = "bool", 0
    elif isinstance(value, int):
        default, cat = "int64", 1
    else:
        default, cat = "float64", 2
    if other is not None and not other._weak:
        oname = other._impl.dtype
        if cat <= _dtypes.category(oname):
            if cat == 1 and oname.startswith("int"):
                _check_int_bounds(value, oname)
            return Tensor(_scalar(value, oname), weak=True)
    return Tensor(_scalar(value, default), weak=True, expr=_scalar_expr.literal(value) if cat == 1 else None)


def _check_int_bounds(value, name):
    info = np.iinfo(name)
    if not info.min <= value <= info.max:
        raise OverflowError(f"Python integer {value} out of bounds for {name}")


def _is_python_int(x):
    return isinstance(x, int) and not isinstance(x, (bool, np.generic))


def _int_parts(value):
    """A Python int as the sign and magnitude C++'s IntegerValue takes; a magnitude past 2**64 - 1,
    beyond every integer dtype, is bounded by it."""
    return value < 0, min(abs(value), 2**64 - 1)


def _scalar(value, name):
    """A 0-d constant of dtype `name`; an integer past 2**53 from its exact bytes (through a
    double it rounded: x + (2**53 + 1) was off by one, == 2**60 + 1 matched 2**60)."""
    if isinstance(value, int) and not isinstance(value, bool) and name.startswith("int"):
        if abs(value) > 2**53:
            return _call(_ops.constant, np.array(value, dtype=name).tobytes(), [], name)
    return _call(_ops.scalar, float(value), name)


def as_tensor(x, like: "Tensor | None" = None) -> "Tensor":
    if isinstance(x, Tensor):
        return x
    if _is_python_number(x):
        return _weak_scalar(x, like)
    if isinstance(x, (np.ndarray, np.generic)):
        return _constant(x)
    if hasattr(x, "__dlpack__"):
        return _constant(np.from_dlpack(x))
    if isinstance(x, (list, tuple)):
        try:
            return _constant(np.asarray(x))
        except Exception:
            pass
    raise _kiln.DTypeError(f"cannot use a {type(x).__name__} as a kiln tensor")


def note_int64_exact(t: "Tensor"):
    """A weak int computed from a Python int argument (2 * s) is computed in int64: where it leaves
    a weak value (an output, a float or int64 partner, a comparison), its true value must fit, or
    the int64 result wrapped where numpy's Python int did not."""
    if t._weak and t._expr is not None and t._impl.dtype == "int64":
        one = _scalar_expr.single(t._expr)
        if one is None or one[1:] != (1, 0):  # not the argument itself
            _scalar_expr.note(t._expr, "int64")


def _apply_weak(t: "Tensor", other: "Tensor") -> "Tensor":
    """A weak tensor (a Python number argument) takes the dtype of a strong partner when numpy's
    weak promotion says so."""
    if not t._weak or other._weak:
        return t
    tname, oname = t._impl.dtype, other._impl.dtype
    if t._expr is not None and tname == "int64" and oname.startswith("int") and oname != tname:
        _scalar_expr.note(t._expr, oname)
    else:
        note_int64_exact(t)
    if tname != oname and _dtypes.category(tname) <= _dtypes.category(oname):
        return Tensor(_call(_ops.astype, t._impl, oname), weak=True)
    return t


def _pair(a, b):
    """Both operands as Tensors, with Python numbers and weak tensors promoted as numpy does.
    Either may be a numpy array or a Python number, both too (kiln.where(m, W, 0.0) with a
    captured W): a number then takes its dtype beside the other operand."""
    if isinstance(a, Tensor):
        ta, tb = a, as_tensor(b, a)
    elif isinstance(b, Tensor) or not _is_python_number(b):
        tb = as_tensor(b)
        ta = as_tensor(a, tb)
    else:
        ta = as_tensor(a)
        tb = as_tensor(b, ta)
    ta, tb = _apply_weak(ta, tb), _apply_weak(tb, ta)
    return ta, tb


def _compare(name, a, b):
    """a OP b. A Python int beside a strong integer or bool tensor is compared exactly, and one past
    the tensor's dtype answers for every element as numpy's does (an int8 x < 1000 is all True;
    it raised OverflowError)."""
    if (isinstance(a, Tensor) and not a._weak and _is_python_int(b)
            and _dtypes.category(a._impl.dtype) <= 1):
        return Tensor(_call(_ops.compare_int, name, a._impl, *_int_parts(b)))
    # A Python int argument beside a narrower integer tensor: compared in int64, exactly (narrowed
    # to the tensor's dtype it raised OverflowError where numpy answers).
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._weak != b._weak:
        weak, strong = (a, b) if a._weak else (b, a)
        if weak._impl.dtype == "int64" and strong._impl.dtype in ("int8", "int32"):
            note_int64_exact(weak)
            wide = Tensor(_call(_ops.astype, strong._impl, "int64"))
            a, b = (a, wide) if a is weak else (wide, b)
    return _binary(getattr(_ops, name), a, b)


def _weak_float(v):
    """v for a true division: a Python int or a weak int (a Python int argument) as a float."""
    if _is_python_int(v):
        return float(v)
    if isinstance(v, Tensor) and v._weak and v._impl.dtype == "int64":
        note_int64_exact(v)
        return Tensor(_call(_ops.astype, v._impl, "float64"), weak=True)
    return v


def _binary(op, a, b, *, true_divide=False):
    # True division is in float64 for integers: a Python int there is a float (numpy's int8 x /
    # 1000 is x / 1000.0, not an OverflowError), a Python int argument too.
    if true_divide:
        a, b = (_weak_float(v) for v in (a, b))
    ta, tb = _pair(a, b)
    x, y = ta._impl, tb._impl
    if true_divide and _dtypes.category(x.dtype) < 2 and _dtypes.category(y.dtype) < 2:
        x = _call(_ops.astype, x, "float64")
        y = _call(_ops.astype, y, "float64")
    weak = ta._weak and tb._weak
    expr = _scalar_expr.combine(_EXPR_OPS[op], ta._expr, tb._expr) if weak and op in _EXPR_OPS else None
    return Tensor(_call(op, x, y), weak=weak, expr=expr)


# The operations of two weak ints that numpy computes with Python ints (a * b, not kiln.maximum).
_EXPR_OPS = {_ops.add: "add", _ops.sub: "sub", _ops.mul: "mul", _ops.pow: "pow"}


def _unary(op, x, *extra):
    t = as_tensor(x)
    return Tensor(_call(op, t._impl, *extra), weak=t._weak)


def _axes(axis):
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return [operator.index(a) for a in axis]
    return [operator.index(axis)]


def _shape_arg(shape):
    """A shape given as ints (or symbolic dims, which become -1)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    out = []
    for d in shape:
        v = -1 if isinstance(d, SymbolicDim) else operator.index(d)
        if not -(2**63) <= v < 2**63:
            raise _kiln.ShapeError(f"shape {tuple(shape)}: dim {v} does not fit in int64")
        out.append(v)
    return out


def _reduce(op, x, axis, keepdims):
    t = as_tensor(x)
    return Tensor(_call(op, t._impl, _axes(axis), bool(keepdims)))


def _index_specs(key, ndim):
    if not isinstance(key, tuple):
        key = (key,)
    specs = []
    for k in key:
        if k is None:
            specs.append((2, 0, None, None, None))
        elif k is Ellipsis:
            specs.append((3, 0, None, None, None))
        elif isinstance(k, slice):
            start = None if k.start is None else operator.index(k.start)
            stop = None if k.stop is None else operator.index(k.stop)
            step = None if k.step is None else operator.index(k.step)
            if step == 0:
                raise _kiln.ShapeError("slice step cannot be zero")
            specs.append((1, 0, start, stop, step))
        elif isinstance(k, (bool, np.bool_)) or isinstance(k, (Tensor, np.ndarray, list)):
            raise IndexError(
                "kiln supports basic indexing only (integers, slices, None, ...); "
                f"got a {type(k).__name__} index"
            )
        else:
            try:
                specs.append((0, operator.index(k), None, None, None))
            except TypeError:
                raise IndexError(f"invalid index {k!r}: expected an int, a slice, None or ...") from None
    return specs


class Tensor:
    """The traced value inside a @kiln.jit function (nothing is computed while tracing)."""

    __slots__ = ("_impl", "_weak", "_expr")
    # numpy defers to Tensor's reflected operators (array + tensor -> Tensor.__radd__).
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, impl, weak=False, expr=None):
        self._impl = impl
        self._weak = weak
        # A weak int computed from Python int arguments and literals: how (_scalar_expr), so that
        # each call can check it as numpy does; None for anything else.
        self._expr = expr

    # --- properties
    @property
    def shape(self):
        dims = self._impl.shape
        if all(d >= 0 for d in dims):
            return tuple(dims)
        names = _parse_shape_names(self._impl.shape_str, len(dims))
        return tuple(d if d >= 0 else SymbolicDim(n) for d, n in zip(dims, names))

    @property
    def dtype(self):
        return _dtypes.from_name(self._impl.dtype)

    @property
    def ndim(self):
        return self._impl.ndim

    @property
    def size(self):
        # A symbolic dim has no integer value: it raises, as len() and int() do (under
        # dynamic="auto" that retraces with the dim exact), where counting it as 0 gave
        # x.sum() / x.size = inf.
        n = 1
        for d in self.shape:
            n *= operator.index(d)
        return n

    @property
    def T(self):
        return Tensor(_call(_ops.T, self._impl), weak=self._weak)

    def __repr__(self):
        return f"kiln.Tensor(shape={self._impl.shape_str}, dtype={self._impl.dtype})"

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d kiln.Tensor")
        d = self.shape[0]
        return operator.index(d)

    def __bool__(self):
        raise _kiln.Error(
            "a traced kiln.Tensor has no value: Python control flow (if/while/and/or) cannot depend "
            "on it; use kiln.where, or pass the value as a static argument (static_argnums)"
        )

    def __iter__(self):
        raise TypeError("iterating over a traced kiln.Tensor is not supported; index it instead")

    def __array__(self, *args, **kwargs):
        raise TypeError(
            "a traced kiln.Tensor cannot become a numpy array inside a @kiln.jit function; "
            "use kiln's functions (kiln.exp, kiln.sum, ...) instead of numpy's"
        )

    def __float__(self):
        return self.__bool__()

    __int__ = __float__
    __index__ = __float__
    __hash__ = object.__hash__

    # --- arithmetic
    def __add__(self, o):
        return _binary(_ops.add, self, o)

    def __radd__(self, o):
        return _binary(_ops.add, o, self)

    def __sub__(self, o):
        return _binary(_ops.sub, self, o)

    def __rsub__(self, o):
        return _binary(_ops.sub, o, self)

    def __mul__(self, o):
        return _binary(_ops.mul, self, o)

    def __rmul__(self, o):
        return _binary(_ops.mul, o, self)

    def __truediv__(self, o):
        return _binary(_ops.div, self, o, true_divide=True)

    def __rtruediv__(self, o):
        return _binary(_ops.div, o, self, true_divide=True)

    def __pow__(self, o):
        return _pow(self, o)

    def __rpow__(self, o):
        return _pow(o, self)

    def __matmul__(self, o):
        return _binary(_ops.matmul, self, o)

    def __rmatmul__(self, o):
        return _binary(_ops.matmul, o, self)

    def __neg__(self):
        out = _unary(_ops.neg, self)
        out._expr = _scalar_expr.negate(self._expr)
        return out

    def __pos__(self):
        return self

    def __abs__(self):
        return self.abs()

    def __invert__(self):
        if self._impl.dtype != "bool":
            raise _kiln.DTypeError(f"~ is defined for bool tensors only, got {self._impl.dtype}")
        return _binary(_ops.eq, self, False)

    # --- comparisons (bool tensors)
    def __lt__(self, o):
        return _compare("lt", self, o)

    def __le__(self, o):
        return _compare("le", self, o)

    def __gt__(self, o):
        return _compare("gt", self, o)

    def __ge__(self, o):
        return _compare("ge", self, o)

    def __eq__(self, o):
        return _compare("eq", self, o)

    def __ne__(self, o):
        return _compare("ne", self, o)

    # --- indexing and methods
    def __getitem__(self, key):
        return Tensor(_call(_ops.index, self._impl, _index_specs(key, self.ndim)), weak=self._weak)

    def sum(self, axis=None, keepdims=False):
        return _reduce(_ops.sum, self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _reduce(_ops.mean, self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduce(_ops.max, self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduce(_ops.min, self, axis, keepdims)

    def reshape(self, *shape):
        return Tensor(_call(_ops.reshape, self._impl, _shape_arg(shape)), weak=self._weak)

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = () if axes[0] is None else tuple(axes[0])
        return Tensor(_call(_ops.transpose, self._impl, [operator.index(a) for a in axes]), weak=self._weak)

    def astype(self, dtype):
        return Tensor(_call(_ops.astype, self._impl, _dtypes.name_of(dtype)))

    def abs(self):
        out = _unary(_ops.abs, self)
        out._expr = _scalar_expr.absolute(self._expr)
        return out


def _pow(a, b):
    # x ** <Python number> keeps x's dtype when numpy's weak promotion does (the common x ** 2).
    if isinstance(a, Tensor) and _is_python_number(b) and not isinstance(b, bool):
        cat = 1 if isinstance(b, int) else 2
        name = a._impl.dtype
        if a._weak is False and cat <= _dtypes.category(name):
            if cat == 1 and name.startswith("int"):
                # Exactly, as an int (through a double x ** (2**62) was float64).
                if b < 0:
                    raise ValueError("Integers to negative integer powers are not allowed.")
                _check_int_bounds(b, name)
                return Tensor(_call(_ops.pow_int, a._impl, *_int_parts(b)))
            return Tensor(_call(_ops.pow_scalar, a._impl, float(b)))
    return _binary(_ops.pow, a, b)


def is_tensor(x):
    return isinstance(x, Tensor)


__all__ = ["Tensor", "SymbolicDim", "as_tensor"]
