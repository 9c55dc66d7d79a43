"""How a weak int inside a trace was computed from the function's Python int arguments.

numpy computes `x + s * t + 1` with Python ints s and t exactly and raises OverflowError when the
value does not fit the dtype of the array it meets (int8 beside an int8 array); kiln computes it in
the graph, in int64, where it wraps. A trace therefore notes, for every such value that meets a
dtype, the expression and the dtype, and each call checks the value of the expression for that
call's arguments (kiln._kiln.JitFunction, python/src/jit.cpp). A value of one argument, m * s + c,
becomes a range for s, checked in C++; any other is evaluated here, with Python ints.

An expression is a hashable tuple:
    ("lin", ((arg, m), ...), c)   sum of m * argument + c, terms sorted by argument, m != 0;
                                  a literal is ("lin", (), c)
    ("add" | "sub" | "mul" | "pow", a, b), ("abs", a)
None stands for a value that is not tracked (a float, a reduction, kiln.maximum of two weak ints,
an expression of more than _MAX_NODES nodes).
"""

import threading

import numpy as np

# The trace running on this thread: {expression: (lo, hi, dtype name)}, set by
# _trace.run_trace. For one argument's m * s + c the range is the one s must be in, else the
# dtype's range for the expression's value.
bounds = threading.local()

_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
_MAX_NODES = 64  # past this, a value is not tracked (a loop multiplying by s a thousand times)
_OPS = {"add": "+", "sub": "-", "mul": "*", "pow": "**"}


def argument(i):
    return ("lin", ((i, 1),), 0)


def literal(c):
    return ("lin", (), c)


def _linear_sum(a, b, sign):
    terms = dict(a[1])
    for arg, m in b[1]:
        terms[arg] = terms.get(arg, 0) + sign * m
    return ("lin", tuple(sorted((k, m) for k, m in terms.items() if m != 0)), a[2] + sign * b[2])


def _scaled(a, k):
    return ("lin", tuple((arg, m * k) for arg, m in a[1]) if k != 0 else (), a[2] * k)


def _nodes(e):
    return 1 if e[0] == "lin" else 1 + sum(_nodes(x) for x in e[1:])


def combine(op, a, b):
    """The expression of `a op b` (op: "add", "sub", "mul", "pow"), None when either is None."""
    if a is None or b is None:
        return None
    if a[0] == "lin" and b[0] == "lin":
        if op in ("add", "sub"):
            return _linear_sum(a, b, 1 if op == "add" else -1)
        if op == "mul" and (not a[1] or not b[1]):  # one side is a constant
            return _scaled(b, a[2]) if not a[1] else _scaled(a, b[2])
    e = (op, a, b)
    return e if _nodes(e) <= _MAX_NODES else None


def negate(a):
    if a is None:
        return None
    return _scaled(a, -1) if a[0] == "lin" else combine("sub", literal(0), a)


def absolute(a):
    if a is None:
        return None
    e = ("abs", a)
    return e if _nodes(e) <= _MAX_NODES else None


def single(e):
    """(arg, m, c) when e is m * s + c for one argument s, else None."""
    if e is not None and e[0] == "lin" and len(e[1]) == 1:
        (arg, m), = e[1]
        return arg, m, e[2]
    return None


def _arguments(e, out):
    if e[0] == "lin":
        out.update(arg for arg, _ in e[1])
    else:
        for x in e[1:]:
            _arguments(x, out)
    return out


class _PastInt64(Exception):
    """A part of the expression that kiln cannot compute in int64 as Python does (the operand of
    abs, an exponent, a power past int64); its text is the value."""


def value(e, args):
    """The expression's value for the call arguments `args` with Python ints, as numpy computes
    it. Raises _PastInt64 where kiln's int64 result would differ on the way."""
    kind = e[0]
    if kind == "lin":
        return sum(m * args[arg] for arg, m in e[1]) + e[2]
    if kind == "abs":
        return _abs64(value(e[1], args))
    a, b = value(e[1], args), value(e[2], args)
    if kind == "add":
        return a + b
    if kind == "sub":
        return a - b
    if kind == "mul":
        return a * b
    if b < 0:
        raise ValueError(
            f"Integers to negative integer powers are not allowed ({text(e)} with the exponent "
            f"{b}: Python's result is a float, the traced one an integer)"
        )
    return _pow64(a, b)


def text(e, names=None, code=False):
    """e as Python source, with the argument names (or arg0, arg1, ...); with code, as the source
    _fast_check runs (abs and ** as _abs64 and _pow64)."""

    def name(i):
        return names[i] if names and i < len(names) and names[i] else f"arg{i}"

    kind = e[0]
    if kind == "lin":
        parts = [(m, name(arg)) for arg, m in e[1]] + ([(e[2], None)] if e[2] or not e[1] else [])
        out = ""
        for m, n in parts:
            mag = abs(m)
            term = str(mag) if n is None else n if mag == 1 else f"{mag} * {n}"
            out += (("-" if m < 0 else "") + term) if not out else (" - " if m < 0 else " + ") + term
        return f"({out})" if len(parts) > 1 else out
    if kind == "abs":
        inner = text(e[1], names, code)
        fn = "_abs64" if code else "abs"
        return f"{fn}{inner}" if inner.startswith("(") and inner.endswith(")") else f"{fn}({inner})"
    if kind == "pow" and code:
        return f"_pow64({text(e[1], names, code)}, {text(e[2], names, code)})"
    return f"({text(e[1], names, code)} {_OPS[kind]} {text(e[2], names, code)})"


# abs and ** as kiln's int64 graph can follow them (value() and _fast_check's code): abs of a
# value past int64 differs there, and a power past 2**64 is too large to compute (a negative
# exponent: value() raises numpy's ValueError first).
def _abs64(v):
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise _PastInt64(str(v))
    return abs(v)


def _pow64(a, b):
    if b < 0 or (abs(a) > 1 and b > 64):
        raise _PastInt64(f"{a} ** {b}")
    return a**b


def _fast_check(e, lo, hi):
    """A function of the call's arguments that is True where e's value is within [lo, hi] (or an
    argument is not an int this call) and False where check() must raise: what each call runs,
    compiled once per bound (check() evaluates the expression by walking it, ~1.7 us a call)."""
    used = sorted(_arguments(e, set()))
    names = [f"a[{i}]" for i in range(used[-1] + 1)]
    not_ints = " or ".join(f"type(a[{i}]) is not int" for i in used)
    source = (
        "def fast(a):\n"
        f"    if {not_ints}:\n"
        "        return True\n"
        "    try:\n"
        f"        return {lo} <= {text(e, names, code=True)} <= {hi}\n"
        "    except _PastInt64:\n"
        "        return False\n"
    )
    scope = {"_abs64": _abs64, "_pow64": _pow64, "_PastInt64": _PastInt64}
    exec(source, scope)  # noqa: S102 - source built from the expression's own tuples
    return scope["fast"]


def note(e, name):
    """Records that the weak int e meets a tensor of integer dtype `name` (or must fit int64)."""
    if e is None:
        return
    info = np.iinfo(name)
    lo, hi = int(info.min), int(info.max)
    if not _arguments(e, set()):  # a constant: numpy's error now, as for a literal
        try:
            v = value(e, {})
        except _PastInt64 as err:
            v = str(err)
        if not isinstance(v, int) or not lo <= v <= hi:
            raise OverflowError(f"Python integer {v} out of bounds for {name}")
        return
    current = getattr(bounds, "current", None)
    if current is None:
        return
    one = single(e)
    if one is not None:
        _, m, c = one
        if m > 0:
            lo, hi = -(-(lo - c) // m), (hi - c) // m
        else:
            lo, hi = -(-(hi - c) // m), (lo - c) // m
    old_lo, old_hi, narrowest = current.get(e, (lo, hi, name))
    if hi - lo < old_hi - old_lo:
        narrowest = name
    current[e] = (max(lo, old_lo, _INT64_MIN), min(hi, old_hi, _INT64_MAX), narrowest)


def notes(noted):
    """The trace's bounds as the extension takes them: (arg, lo, hi, dtype name, m, c, expression,
    fast check), where arg, m and c describe one argument's m * s + c (expression and check None),
    else are 0, 1, 0."""
    out = []
    for e, (lo, hi, name) in sorted(noted.items(), key=repr):
        one = single(e)
        if one is not None:
            arg, m, c = one
            out.append((arg, lo, hi, name, m, c, None, None))
        else:
            out.append((0, lo, hi, name, 1, 0, e, _fast_check(e, lo, hi)))
    return out


def check(e, lo, hi, name, args, fn_name, params):
    """Raises OverflowError when e's value for the call arguments `args` is outside [lo, hi], the
    range of `name` (or kiln's int64 computation of it differs from Python's); the extension
    calls it where the bound's fast check was False."""
    used = sorted(_arguments(e, set()))
    if not all(isinstance(args[i], int) and not isinstance(args[i], bool) for i in used):
        return  # a float or bool this call: another trace's dtypes
    try:
        v = value(e, args)
        if lo <= v <= hi:
            return
    except _PastInt64 as err:
        v, past = None, err
    source = text(e, params)
    if source.startswith("(") and source.endswith(")"):
        source = source[1:-1]
    if v is not None:
        problem = f"{source} = {v}: Python integer {v} out of bounds for {name}" + (
            ", the dtype kiln computes it in (numpy computes it exactly, and raises OverflowError "
            "beside an int64 tensor)"
            if name == "int64"
            else f" beside an {name} tensor (as in numpy)"
        )
    else:
        problem = f"{source}: {past} is past int64, the dtype kiln computes it in (numpy computes it exactly)"

    def what(i):
        quoted = f" ('{params[i]}')" if i < len(params) and params[i] else ""
        return f"argument {i}{quoted} is {args[i]}"

    raise OverflowError(f"{fn_name}(): {', '.join(what(i) for i in used)}, which makes {problem}")
