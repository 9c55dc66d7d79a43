"""kiln's traced functions (API.md "Functions"). Each takes kiln.Tensors, numpy arrays (constants of
the trace) or Python numbers, and records one op of the IR."""


import builtins
import operator

import numpy as np

from . import _dtypes, _kiln
from ._tensor import Tensor, _binary, _call, _pair, _reduce, _shape_arg, _unary, as_tensor, _pow

_ops = _kiln.ops


def exp(x):
    return _unary(_ops.exp, x)


def log(x):
    return _unary(_ops.log, x)


def sqrt(x):
    return _unary(_ops.sqrt, x)


def rsqrt(x):
    return _unary(_ops.rsqrt, x)


def tanh(x):
    return _unary(_ops.tanh, x)


def sigmoid(x):
    return _unary(_ops.sigmoid, x)


def relu(x):
    return _unary(_ops.relu, x)


def gelu(x, approximate=False):
    """GELU; approximate=True (or "tanh") uses the tanh approximation."""
    return _unary(_ops.gelu, x, bool(approximate) and approximate != "none")


def silu(x):
    return _unary(_ops.silu, x)


def erf(x):
    return _unary(_ops.erf, x)


def abs(x):  # noqa: A001 - kiln.abs, as API.md names it
    return as_tensor(x).abs()


def square(x):
    return _unary(_ops.square, x)


def pow(x, y):  # noqa: A001
    return _pow(as_tensor(x, y if isinstance(y, Tensor) else None), y)


def maximum(a, b):
    return _binary(_ops.maximum, a, b)


def minimum(a, b):
    return _binary(_ops.minimum, a, b)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, (bool, np.generic))


def clip(x, a_min=None, a_max=None):
    t = as_tensor(x)
    cat = _dtypes.category(t._impl.dtype)
    scalar_ok = all(
        v is None or (_is_number(v) and (1 if isinstance(v, int) else 2) <= cat) for v in (a_min, a_max)
    )
    if scalar_ok and cat > 0:
        # An int bound past an integer dtype's range bounds nothing on that side (numpy's result);
        # converted as it is, it wrapped (int8 clip(-1000, 1000) gave -24 for every element).
        # They go in as ints: through a double an int64 bound past 2**53 rounded, and one past 9e15
        # made the result float64.
        if cat == 1:
            info = np.iinfo(t._impl.dtype)
            lo, hi = (None if v is None else int(builtins.min(builtins.max(v, info.min), info.max))
                      for v in (a_min, a_max))
            return Tensor(_call(_ops.clip_int, t._impl, lo, hi), weak=t._weak)
        lo = None if a_min is None else float(a_min)
        hi = None if a_max is None else float(a_max)
        return Tensor(_call(_ops.clip, t._impl, lo, hi), weak=t._weak)
    out = t
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def where(cond, a, b):
    c = as_tensor(cond)
    if c._impl.dtype != "bool":
        c = Tensor(_call(_ops.ne, c._impl, _call(_ops.scalar, 0.0, c._impl.dtype)))
    ta, tb = _pair(a, b)
    return Tensor(_call(_ops.where, c._impl, ta._impl, tb._impl), weak=ta._weak and tb._weak)


def matmul(a, b):
    return _binary(_ops.matmul, a, b)


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(_ops.sum, x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    return _reduce(_ops.mean, x, axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(_ops.max, x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(_ops.min, x, axis, keepdims)


def softmax(x, axis=-1):
    return _unary(_ops.softmax, x, operator.index(axis))


def log_softmax(x, axis=-1):
    return _unary(_ops.log_softmax, x, operator.index(axis))


def _opt(t, like):
    return None if t is None else as_tensor(t, like)._impl


def layer_norm(x, weight=None, bias=None, axis=-1, eps=1e-5):
    t = as_tensor(x)
    return Tensor(_call(_ops.layer_norm, t._impl, _opt(weight, t), _opt(bias, t), operator.index(axis), float(eps)))


def rms_norm(x, weight=None, axis=-1, eps=1e-6):
    t = as_tensor(x)
    return Tensor(_call(_ops.rms_norm, t._impl, _opt(weight, t), operator.index(axis), float(eps)))


def _pair_arg(v, name):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise _kiln.ShapeError(f"conv2d: {name} must be an int or a pair, got {v!r}")
        return (operator.index(v[0]), operator.index(v[1]))
    v = operator.index(v)
    return (v, v)


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution, NCHW input and OIHW weight (cross-correlation, as in PyTorch)."""
    tx = as_tensor(x)
    tw = as_tensor(w, tx)
    return Tensor(
        _call(
            _ops.conv2d,
            tx._impl,
            tw._impl,
            _opt(bias, tx),
            _pair_arg(stride, "stride"),
            _pair_arg(padding, "padding"),
            _pair_arg(dilation, "dilation"),
            operator.index(groups),
        )
    )


def reshape(x, shape):
    t = as_tensor(x)
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    return Tensor(_call(_ops.reshape, t._impl, _shape_arg(tuple(shape))), weak=t._weak)


def transpose(x, axes=None):
    t = as_tensor(x)
    axes = [] if axes is None else [operator.index(a) for a in axes]
    return Tensor(_call(_ops.transpose, t._impl, axes), weak=t._weak)


def broadcast_to(x, shape):
    t = as_tensor(x)
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    return Tensor(_call(_ops.broadcast_to, t._impl, _shape_arg(tuple(shape))), weak=t._weak)


def concatenate(xs, axis=0):
    ts = [as_tensor(x) for x in xs]
    if not ts:
        raise _kiln.ShapeError("concatenate: need at least one array")
    names = {t._impl.dtype for t in ts}
    if len(names) > 1:  # promote as numpy does
        try:
            common = _dtypes.name_of(np.result_type(*[_dtypes.numpy_dtype(t._impl.dtype) for t in ts]))
        except Exception:
            common = None
        if common is not None:
            ts = [t if t._impl.dtype == common else Tensor(_call(_ops.astype, t._impl, common)) for t in ts]
    return Tensor(_call(_ops.concatenate, [t._impl for t in ts], operator.index(axis)))


def astype(x, dtype):
    t = as_tensor(x)
    return Tensor(_call(_ops.astype, t._impl, _dtypes.name_of(dtype)))


