"""kiln.jit: the decorator. It checks the options and the function's signature once, then hands
everything to the C++ JitFunction, whose __call__ is the whole per-call path."""

import functools
import inspect as _inspect

import numpy as np

from . import _kiln
from ._trace import run_trace



class JitFunction(_kiln.JitFunctionBase):
    """A function compiled by kiln.jit. Calling it runs the compiled code (tracing and compiling
    first for a new signature); ``inspect(*args)`` shows the graph and kernels; ``stats()`` counts."""

    __slots__ = ("__dict__", "__weakref__")

    def __get__(self, obj, objtype=None):  # a decorated method binds its instance like a function
        if obj is None:
            return self
        import functools as _ft

        return _ft.partial(self, obj)


# kiln::DynamicMode
_AUTO, _EXACT, _SYMBOLIC, _PER_ARG = 0, 1, 2, 3


def _signature_info(fn):
    try:
        sig = _inspect.signature(fn)
    except (TypeError, ValueError):
        return 0, -1, []
    names, min_args, max_args = [], 0, 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
            max_args += 1
            if p.default is p.empty:
                min_args += 1
        elif p.kind == p.VAR_POSITIONAL:
            max_args = -1
        elif p.kind == p.KEYWORD_ONLY and p.default is p.empty:
            raise TypeError(f"kiln.jit: keyword-only parameter '{p.name}' needs a default "
                            "(arguments are passed by position)")
    return min_args, max_args, names


def _bind_arguments(fn, args, kwargs):
    """Keyword arguments -> positions (the slow path of a call with keywords)."""
    sig = _inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            out.append(bound.arguments[p.name])
        elif p.kind == p.VAR_POSITIONAL:
            out.extend(bound.arguments.get(p.name, ()))
        elif p.kind == p.KEYWORD_ONLY and bound.arguments.get(p.name, p.default) is not p.default:
            raise TypeError(f"kiln.jit: keyword-only argument '{p.name}' cannot be traced; make it positional")
    return tuple(out)


def _is_index(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _index_list(v, what, expected):
    """One index or an iterable of them as a list of ints that fit in an int32, else TypeError or
    ValueError naming `what`."""
    items = [v] if _is_index(v) else v
    try:
        items = list(items)
    except TypeError:
        items = [None]
    if not all(_is_index(i) for i in items):
        raise TypeError(f"kiln.jit: {what} is {expected}, got {v!r}")
    for i in items:
        if not -(2**31) <= i < 2**31:
            raise ValueError(f"kiln.jit: {what} holds {i}, out of range")
    return [int(i) for i in items]


def _dynamic(dynamic, names, max_args):
    if dynamic == "auto" or dynamic is None:
        return _AUTO, {}
    if dynamic is False:
        return _EXACT, {}
    if dynamic is True:
        return _SYMBOLIC, {}
    if isinstance(dynamic, dict):
        dims = {}
        for k, v in dynamic.items():
            if isinstance(k, str):
                if k not in names:
                    raise ValueError(f"kiln.jit: dynamic names argument '{k}', which the function does not have")
                k = names.index(k)
            elif not _is_index(k):
                raise TypeError(f"kiln.jit: dynamic keys are argument names or indices, got {k!r}")
            elif max_args >= 0 and not -max_args <= k < max_args:
                raise ValueError(f"kiln.jit: dynamic names argument {k}, but the function takes {max_args} arguments")
            dims[k] = _index_list(v, f"dynamic[{k!r}]", "a dim index or a list of them")
        return _PER_ARG, dims
    raise ValueError(f'kiln.jit: dynamic must be "auto", False, True or a dict, got {dynamic!r}')


def _device(device):
    if not isinstance(device, str):
        raise TypeError(f'kiln.jit: device must be "cpu", "cuda" or "cuda:N", got {device!r}')
    if device == "cpu" or device == "cuda":
        return device
    if device.startswith("cuda:") and device[5:].isdigit():
        return device
    raise ValueError(f'kiln.jit: device must be "cpu", "cuda" or "cuda:N", got {device!r}')


def jit(fn=None, *, dynamic="auto", device="cpu", static_argnums=(), cache=True, max_variants=0):
    """Compiles `fn` for the dtypes and shapes it is called with; see kiln's API.md.

    Usable bare (``@kiln.jit``) or with options (``@kiln.jit(dynamic=False)``)."""
    if fn is None:
        return functools.partial(jit, dynamic=dynamic, device=device, static_argnums=static_argnums,
                                 cache=cache, max_variants=max_variants)
    if not callable(fn):
        raise TypeError(f"kiln.jit: expected a function, got {type(fn).__name__}")
    static_argnums = _index_list(static_argnums, "static_argnums", "an argument index or a list of them")
    if not _is_index(max_variants) or not 0 <= max_variants < 2**31:
        raise ValueError(f"kiln.jit: max_variants is a count from 1 (0: kiln's default), got {max_variants!r}")
    min_args, max_args, names = _signature_info(fn)
    for i in static_argnums:
        if max_args >= 0 and not -max_args <= i < max_args:
            raise ValueError(f"kiln.jit: static_argnums has {i}, but the function takes {max_args} arguments")
    if max_args >= 0:
        static_argnums = [i % max_args if max_args else i for i in static_argnums]
    mode, dims = _dynamic(dynamic, names, max_args)
    name = getattr(fn, "__name__", "fn")
    jf = JitFunction(fn, run_trace, mode, dims, _device(device), static_argnums, bool(cache), min_args,
                     max_args, names, name, int(max_variants))
    functools.update_wrapper(jf, fn, updated=())
    return jf
