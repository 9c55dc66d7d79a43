"""Values computed from Python int arguments, against numpy over random expressions: numpy computes
`x + (s * t - 5)` with Python ints and raises OverflowError where the value does not fit x's
dtype; a @kiln.jit function computes the same value in its graph and must give numpy's result or
its error at every call (kiln/_scalar_expr.py)."""

import random

import numpy as np
import pytest

import kiln

# Every test here compiles kernels only the LLVM backend builds (see conftest.py).
pytestmark = pytest.mark.llvm

# Argument values at and past the ends of int8, int32 and int64 (and beyond what int64 holds
# once added or multiplied).
VALUES = [0, 1, -1, 2, 7, -100, 127, 128, -129, 1000, 2**31 - 1, 2**31, -(2**31) - 1, 2**40,
          2**62, -(2**62), 2**63 - 1, -(2**63)]
LITERALS = [1, 2, 3, -5, 100]


def _leaf(rng):
    return rng.choice(["s", "t", "s", "t", str(rng.choice(LITERALS))])


def _expression(rng, depth):
    if depth == 0:
        return _leaf(rng)
    kind = rng.choice(["+", "-", "*", "abs", "neg"])
    if kind == "abs":
        return f"abs({_expression(rng, depth - 1)})"
    if kind == "neg":
        return f"-({_expression(rng, depth - 1)})"
    return f"({_expression(rng, depth - 1)} {kind} {_expression(rng, rng.randint(0, depth - 1))})"


def _outcome(fn, x, s, t):
    try:
        return fn(x, s, t)
    except OverflowError as e:
        return e


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_random_expressions_of_python_int_arguments_match_numpy(dtype):
    rng = random.Random(5600 + np.dtype(dtype).itemsize)
    x = np.array([-3, 0, 2], dtype)
    checked = raised = 0
    for _ in range(40):
        source = f"lambda x, s, t: x + {_expression(rng, rng.randint(1, 3))}"
        fn = eval(source)  # noqa: S307 - the test's own expression
        f = kiln.jit(fn)
        for _ in range(8):
            s, t = rng.choice(VALUES), rng.choice(VALUES)
            want, got = _outcome(fn, x, s, t), _outcome(f, x, s, t)
            where = f"{source} with s={s}, t={t}"
            if isinstance(want, OverflowError):
                assert isinstance(got, OverflowError), f"{where}: numpy raised {want}, kiln gave {got}"
                raised += 1
            elif isinstance(got, OverflowError):
                # Where kiln's int64 cannot follow Python: the operand of abs past int64 (numpy
                # computes abs(2**63) exactly and may come back into range).
                assert "past int64" in str(got), f"{where}: numpy gave {want}, kiln raised {got}"
            else:
                np.testing.assert_array_equal(got, want, err_msg=where)
                assert got.dtype == want.dtype, where
                checked += 1
    assert checked > 50 and raised > 20  # both outcomes were exercised
