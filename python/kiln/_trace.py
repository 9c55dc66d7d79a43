"""The bridge kiln::Function calls (through the extension) when it needs a trace: build kiln.Tensor
proxies, call the user's function, flatten what it returns."""

import os
import types

import numpy as np

from . import _scalar_expr, _tensor
from ._tensor import Tensor, as_tensor

_KILN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def run_trace(fn, impls, nargs, static_pos, static_values, scalar_mask):
    """Returns (single_output, [TensorImpl], bounds) for fn traced on `impls` (the tensor
    arguments) with the static arguments in their positions; bounds: what each call must check of
    the values computed from its Python int arguments (_scalar_expr.notes)."""
    static = dict(zip(static_pos, static_values))
    args = []
    it = iter(impls)
    for i in range(nargs):
        if i in static:
            args.append(static[i])
        else:
            impl, scalar = next(it), bool((scalar_mask >> i) & 1)
            tracked = scalar and impl.dtype == "int64"  # a Python int (not a float or bool)
            args.append(Tensor(impl, weak=scalar, expr=_scalar_expr.argument(i) if tracked else None))
    bounds = {}
    outer = getattr(_scalar_expr.bounds, "current", None)
    _scalar_expr.bounds.current = bounds
    try:
        out = fn(*args)
        single = not isinstance(out, (tuple, list))
        if not single and len(out) == 0:
            raise ValueError(f"{_name(fn)} returned an empty {type(out).__name__}: nothing to compute")
        impls = [_output(o, i, fn)._impl for i, o in enumerate([out] if single else out)]
    finally:
        _scalar_expr.bounds.current = outer
    return single, impls, _scalar_expr.notes(bounds)


def _name(fn):
    return getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))


def _output(o, i, fn):
    if isinstance(o, Tensor):
        _tensor.note_int64_exact(o)
        return o
    if isinstance(o, (np.ndarray, np.generic, bool, int, float)):
        return as_tensor(o)
    raise TypeError(
        f"{_name(fn)} returned a {type(o).__name__} (output {i}); a @kiln.jit function returns "
        "kiln Tensors (or a tuple/list of them)"
    )


def clean_exception(exc):
    """Drops kiln's own frames from the traceback so that it ends in the user's code."""
    tb = exc.__traceback__
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_KILN_DIR):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    exc.__traceback__ = new
    return new
