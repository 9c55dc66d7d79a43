"""Elementwise functions and operators against numpy: every dtype they take, shapes with 0, 1 and
broadcasting, Python scalars (which keep the tensor's dtype)."""

import operator

import numpy as np
import pytest

import kiln
from conftest import (ALL_DTYPES, BF16, is_float, xfail_if_known, FLOAT_DTYPES, INT_DTYPES, assert_close, dtype_id, f64, np_erf,
                      np_gelu, random_array, rng_for)

# Every test here compiles kernels only the LLVM backend builds (see conftest.py).
pytestmark = pytest.mark.llvm

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4)]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (kiln function, float64 reference, input range, takes integers)
UNARY = {
    "exp": (kiln.exp, np.exp, (-3, 3), True),
    "log": (kiln.log, np.log, (0.1, 4), False),
    "sqrt": (kiln.sqrt, np.sqrt, (0, 4), True),
    "rsqrt": (kiln.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 4), False),
    "tanh": (kiln.tanh, np.tanh, (-3, 3), False),
    "sigmoid": (kiln.sigmoid, _sigmoid, (-4, 4), False),
    "relu": (kiln.relu, lambda x: np.maximum(x, 0), (-3, 3), True),
    "gelu": (kiln.gelu, np_gelu, (-3, 3), False),
    "gelu_tanh": (lambda x: kiln.gelu(x, approximate=True), lambda x: np_gelu(x, True), (-3, 3), False),
    "silu": (kiln.silu, lambda x: x * _sigmoid(x), (-4, 4), False),
    "erf": (kiln.erf, np_erf, (-2, 2), False),
    "abs": (kiln.abs, np.abs, (-3, 3), True),
    "square": (kiln.square, np.square, (-3, 3), True),
    "neg": (lambda x: -x, np.negative, (-3, 3), True),
    "abs_method": (lambda x: x.abs(), np.abs, (-3, 3), True),
    "abs_builtin": (lambda x: abs(x), np.abs, (-3, 3), True),
}


def float_result(dtype):
    """numpy's result dtype of a float-valued function (exp, sqrt) of `dtype`."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype == BF16:
        return dtype
    return np.exp(np.zeros(1, dtype)).dtype


UNARY_CASES = [(n, d) for n in UNARY for d in FLOAT_DTYPES + (INT_DTYPES if UNARY[n][3] else [])]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=lambda v: v if isinstance(v, str) else dtype_id(v))
def test_unary(name, dtype, request):
    xfail_if_known(request, f"{name}-{np.dtype(dtype).name}")
    fn, ref, (lo, hi), takes_ints = UNARY[name]
    f = kiln.jit(lambda x: fn(x))
    rng = rng_for(name, dtype)
    for shape in SHAPES:
        x = random_array(rng, shape, dtype, lo, hi)
        y = f(x)
        if name in ("exp", "sqrt"):
            want_dtype = float_result(dtype)
        else:
            want_dtype = np.dtype(dtype)
        assert y.dtype == want_dtype, (name, dtype, y.dtype)
        assert y.shape == shape
        expected = ref(f64(x))
        if want_dtype.kind == "i":
            np.testing.assert_array_equal(y, expected.astype(want_dtype))
        else:
            # The reference is exact; kiln rounds once to the result dtype (f16/bf16 compute in f32).
            assert_close(y, expected, want_dtype, extra_rtol=2e-6 if want_dtype == np.float32 else 0.0)


BINARY = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "div": (operator.truediv, np.true_divide),
    "maximum": (kiln.maximum, np.maximum),
    "minimum": (kiln.minimum, np.minimum),
    "pow": (operator.pow, np.power),
    "kiln_pow": (kiln.pow, np.power),
}
COMPARE = {
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
    "ne": operator.ne,
}
BROADCAST = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,)), ((0, 3), (1, 3)), ((1,), (1,))]


def numpy_result_dtype(op, da, db):
    if BF16 is not None and BF16 in (da, db):
        other = db if da == BF16 else da
        if other == BF16 or other.kind in "bi" and other.itemsize == 1 or other == np.bool_:
            return BF16
        return np.result_type(np.float32, other) if other != np.float16 else np.dtype(np.float32)
    return op(np.ones(1, da), np.ones(1, db)).dtype


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_same_dtype(name, dtype):
    kfn, nfn = BINARY[name]
    dtype = np.dtype(dtype)
    f = kiln.jit(lambda a, b: kfn(a, b))
    rng = rng_for(name, dtype)
    for sa, sb in BROADCAST:
        if name in ("pow", "kiln_pow"):
            a = random_array(rng, sa, dtype, 0.5 if is_float(dtype) else -3, 2 if is_float(dtype) else 4)
            b = random_array(rng, sb, dtype, 0 if dtype.kind == "i" else -2, 3 if dtype.kind == "i" else 2)
        else:
            a = random_array(rng, sa, dtype)
            b = random_array(rng, sb, dtype)
            if name == "div":
                b = np.where(b == 0, np.ones((), dtype), b).astype(dtype)
        y = f(a, b)
        want = numpy_result_dtype(nfn, dtype, dtype) if dtype != BF16 else dtype
        if name == "div" and dtype.kind == "i":
            want = np.dtype(np.float64)
        assert y.dtype == want, (name, dtype, y.dtype, want)
        expected = nfn(f64(a), f64(b))
        if want.kind == "i":
            np.testing.assert_array_equal(y, nfn(a, b))
        else:
            assert_close(y, expected, want)


MIXED = [
    (np.float32, np.int32), (np.float16, np.int8), (np.bool_, np.int32), (np.int8, np.int64),
    (np.float32, np.float64), (np.float16, np.float32), (np.int32, np.float16), (np.bool_, np.float32),
]


@pytest.mark.parametrize("da,db", MIXED, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["add", "mul", "sub", "maximum"])
def test_binary_promotion(name, da, db):
    kfn, nfn = BINARY[name]
    if name == "sub" and np.bool_ in (da, db):
        pytest.skip("numpy does not subtract booleans")
    f = kiln.jit(lambda a, b: kfn(a, b))
    rng = rng_for(name, da, db)
    a = random_array(rng, (4, 3), da)
    b = random_array(rng, (3,), db)
    y = f(a, b)
    want = nfn(a, b)
    assert y.dtype == want.dtype
    assert_close(y, nfn(f64(a), f64(b)) if want.dtype.kind == "f" else want, want.dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", list(COMPARE))
def test_comparisons(name, dtype):
    op = COMPARE[name]
    f = kiln.jit(lambda a, b: op(a, b))
    rng = rng_for(name, dtype)
    for sa, sb in BROADCAST[:4]:
        a = random_array(rng, sa, dtype, -2, 2)
        b = random_array(rng, sb, dtype, -2, 2)
        if is_float(dtype):  # make ties likely
            a = np.round(f64(a)).astype(dtype)
            b = np.round(f64(b)).astype(dtype)
        y = f(a, b)
        assert y.dtype == np.bool_
        np.testing.assert_array_equal(y, op(f64(a), f64(b)))


@pytest.mark.parametrize("name", list(COMPARE))
def test_comparisons_with_scalars(name):
    op = COMPARE[name]
    f = kiln.jit(lambda a: (op(a, 1.0), op(2, a)))
    a = np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    y1, y2 = f(a)
    np.testing.assert_array_equal(y1, op(a, 1.0))
    np.testing.assert_array_equal(y2, op(2, a))


SCALAR_EXPRS = {
    "x+2": (lambda x: x + 2, lambda x: x + 2),
    "2-x": (lambda x: 2 - x, lambda x: 2 - x),
    "x*3": (lambda x: x * 3, lambda x: x * 3),
    "x*0.5": (lambda x: x * 0.5, lambda x: x * 0.5),
    "x/4": (lambda x: x / 4, lambda x: x / 4),
    "1.5/x": (lambda x: 1.5 / x, lambda x: 1.5 / x),
    "x**2": (lambda x: x**2, lambda x: x**2),
    "x-True": (lambda x: x - 1.0 + True, lambda x: x - 1.0 + True),
    "max(x,0)": (lambda x: kiln.maximum(x, 0), lambda x: np.maximum(x, 0)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.int32, np.int64] + ([BF16] if BF16 else []), ids=dtype_id)
@pytest.mark.parametrize("expr", list(SCALAR_EXPRS))
def test_python_scalars_keep_dtype(expr, dtype):
    kfn, nfn = SCALAR_EXPRS[expr]
    dtype = np.dtype(dtype)
    rng = rng_for(expr, dtype)
    x = random_array(rng, (5, 3), dtype, 1, 4)  # positive: 1.5/x
    y = kiln.jit(kfn)(x)
    want = nfn(x)  # numpy's own answer (NEP 50 weak scalars)
    if dtype == BF16:
        want = want.astype(BF16) if want.dtype.kind != "f" or want.dtype.itemsize != 8 else want
    assert y.dtype == want.dtype, (expr, dtype, y.dtype, want.dtype)
    assert_close(y, nfn(f64(x)) if want.dtype.kind == "f" or want.dtype == BF16 else want, want.dtype)


def test_python_number_arguments_are_weak():
    @kiln.jit
    def f(x, s, n):
        return x * s + n

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = f(x, 0.5, 3)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, x * 0.5 + 3)
    y = f(x, 2.0, 1)  # same trace, new values
    np.testing.assert_allclose(y, x * 2.0 + 1)
    xi = np.arange(6, dtype=np.int32)
    assert f(xi, 2, 1).dtype == np.int32
    assert f(xi, 0.5, 1).dtype == np.float64  # int tensor with a Python float -> float64, as numpy


def test_numpy_scalars_are_strong():
    x = np.ones(3, np.float32)
    y = kiln.jit(lambda x: x * np.float64(2.0))(x)
    assert y.dtype == (x * np.float64(2.0)).dtype


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_where(dtype):
    f = kiln.jit(lambda c, a, b: kiln.where(c, a, b))
    rng = rng_for("where", dtype)
    c = rng.random((3, 4)) < 0.5
    a = random_array(rng, (3, 4), dtype)
    b = random_array(rng, (4,), dtype)
    y = f(c, a, b)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(f64(y), f64(np.where(c, a, b)))


def test_where_with_scalars_and_masks():
    @kiln.jit
    def f(x):
        return kiln.where(x > 0, x, 0.0), kiln.where(x < 0, -1, x)

    x = np.linspace(-2, 2, 9, dtype=np.float32)
    a, b = f(x)
    assert a.dtype == np.float32 and b.dtype == np.float32
    np.testing.assert_array_equal(a, np.where(x > 0, x, 0.0))
    np.testing.assert_array_equal(b, np.where(x < 0, -1, x))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8], ids=dtype_id)
def test_clip(dtype):
    rng = rng_for("clip", dtype)
    x = random_array(rng, (4, 5), dtype, -8, 8)
    for lo, hi in [(-1, 2), (None, 3), (-2, None)]:
        y = kiln.jit(lambda x: kiln.clip(x, lo, hi))(x)
        want = np.clip(x, lo, hi)
        assert y.dtype == want.dtype
        np.testing.assert_array_equal(f64(y), f64(want))


def test_clip_with_array_bounds():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    lo = np.full((4,), -1.0, np.float32)
    y = kiln.jit(lambda x, lo: kiln.clip(x, lo, 2.0))(x, lo)
    np.testing.assert_array_equal(y, np.clip(x, lo, 2.0))


def test_invert_bool():
    x = np.array([True, False, True])
    np.testing.assert_array_equal(kiln.jit(lambda x: ~x)(x), ~x)


@pytest.mark.parametrize("dtype", [np.int8, np.int32], ids=dtype_id)
def test_integer_pow_wraps(dtype):
    x = np.array([9, 2, -3, 7, 0, 1], dtype)
    y = kiln.jit(lambda x: x ** 3)(x)
    np.testing.assert_array_equal(y, np.power(x, np.asarray(3, dtype)))
    z = kiln.jit(lambda x: kiln.pow(x, 8))(np.array([2, -2, 3], dtype))
    np.testing.assert_array_equal(z, np.power(np.array([2, -2, 3], dtype), np.asarray(8, dtype)))


@pytest.mark.llvm
def test_two_operand_functions_take_numpy_constants_and_numbers_on_both_sides():
    # With no traced Tensor among the two operands, these failed with AttributeError ('_weak').
    w1, w2 = np.ones((3, 3), np.float32), np.eye(3, dtype=np.float32)
    x = np.arange(3, dtype=np.float32) - 1
    cases = [
        (lambda x: x @ kiln.matmul(w1, w2), lambda x: x @ np.matmul(w1, w2)),
        (lambda x: kiln.where(x > 0, w1[0], 0.0), lambda x: np.where(x > 0, w1[0], 0.0)),
        (lambda x: x + kiln.maximum(0.0, w2[0]), lambda x: x + np.maximum(0.0, w2[0])),
        (lambda x: x * kiln.where(x > 0, 2, w1[1]), lambda x: x * np.where(x > 0, 2, w1[1])),
    ]
    for fn, ref in cases:
        got, want = kiln.jit(fn)(x), ref(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    # Two Python numbers make a weak value (numpy's np.minimum returns a float64 scalar, strong).
    got = kiln.jit(lambda x: x + kiln.minimum(1.0, 2.0))(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x + 1)


def test_int64_constants_past_2_53_stay_exact():
    # They went through a double: x + (2**53 + 1) was off by one, and constants 2**60 and
    # 2**60 + 1 shared one kernel key, so y == 2**60 + 1 ran the kernel of y == 2**60.
    x = np.arange(4, dtype=np.int64)
    y = x + 2**60
    np.testing.assert_array_equal(kiln.jit(lambda x: x + (2**53 + 1))(x), x + (2**53 + 1))
    np.testing.assert_array_equal(kiln.jit(lambda x: x * (2**62 + 1))(x), x * (2**62 + 1))
    np.testing.assert_array_equal(kiln.jit(lambda y: y == 2**60)(y), y == 2**60)
    np.testing.assert_array_equal(kiln.jit(lambda y: y == 2**60 + 1)(y), y == 2**60 + 1)
    np.testing.assert_array_equal(kiln.jit(lambda x: kiln.maximum(x, 2**60 + 3))(x),
                                  np.maximum(x, 2**60 + 3))
    np.testing.assert_array_equal(kiln.jit(lambda x: kiln.where(x > 1, x, 2**60 + 3))(x),
                                  np.where(x > 1, x, 2**60 + 3))


def test_integer_math_on_captured_constants_is_exact_past_2_53():
    # kiln ops on captured arrays alone are folded at compile time; the folding went through
    # doubles, so int64 values past 2^53 lost their low bits and int32 products their wrap.
    d = np.array([2**60 + 1, 3**35, -(2**55) - 3, 2**63 - 1], np.int64)
    c = np.array([2**31 - 1, 3**19, 46341], np.int32)
    x, xc = np.zeros(4, np.int64), np.zeros(3, np.int32)
    np.testing.assert_array_equal(kiln.jit(lambda x: x + kiln.abs(d))(x), x + np.abs(d))
    np.testing.assert_array_equal(kiln.jit(lambda x: x + kiln.maximum(d, 7))(x),
                                  x + np.maximum(d, 7))
    np.testing.assert_array_equal(kiln.jit(lambda x: x + kiln.square(d))(x), x + d * d)
    np.testing.assert_array_equal(kiln.jit(lambda x: x + kiln.sum(kiln.abs(d)))(x),
                                  x + np.abs(d).sum())
    np.testing.assert_array_equal(kiln.jit(lambda x: x + kiln.square(c))(xc), xc + c * c)


def test_integer_pow_is_numpys_exactly_past_2_53_and_when_it_wraps():
    # Integer pow ran on doubles: 3**35 lost its low bits and powers past 2**63 saturated.
    b = np.array([3, 3, 7, -3, 2, 2, 5, 0, 4, -7], np.int64)
    e = np.array([35, 41, 30, 39, 63, 64, 100, 0, 0, 33], np.int64)
    f = kiln.jit(lambda b, e: b ** e)
    np.testing.assert_array_equal(f(b, e), b ** e)
    np.testing.assert_array_equal(kiln.jit(lambda b: b ** 35)(b), b ** 35)
    np.testing.assert_array_equal(f(b[::2], e[1::2]), b[::2] ** e[1::2])
    for dt in (np.int32, np.int8):
        bs, es = b.astype(dt), (e % 100).astype(dt)
        np.testing.assert_array_equal(f(bs, es), bs ** es)


def test_clip_bounds_past_an_integer_dtypes_range_bound_nothing():
    # Converted as they were, they wrapped: int8 clip(-1000, 1000) gave -24 everywhere.
    x = np.array([-128, -5, 0, 5, 127], np.int8)
    for lo, hi in [(-1000, 1000), (-1000, 3), (-3, 1000), (200, 300), (-300, -200)]:
        got = kiln.jit(lambda x: kiln.clip(x, lo, hi))(x)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, np.clip(x.astype(np.int64), lo, hi).clip(-128, 127))


def test_int64_clip_bounds_and_pow_exponents_past_2_53_stay_integers():
    # They went in as doubles: a bound or exponent past 9e15 made the result float64
    # (clip(x, 0, 2**62) and x ** (2**62) on int64 were float64, the latter inf).
    x = np.array([1, 2, 2**62 + 1, -(2**63), 3**39], np.int64)
    for lo, hi in [(0, 2**62), (-(2**53) - 1, 2**53 + 1), (None, 2**63 + 5), (-(2**70), None)]:
        got = kiln.jit(lambda x: kiln.clip(x, lo, hi))(x)
        assert got.dtype == np.int64
        want = np.clip(x, None if lo is None else max(lo, -(2**63)), None if hi is None else min(hi, 2**63 - 1))
        np.testing.assert_array_equal(got, want)
    for e in [2**62, 2**62 + 1, 2**63 - 1, 3]:
        got = kiln.jit(lambda x: x ** e)(x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, x ** e)
    with pytest.raises(OverflowError, match="300 out of bounds for int8"):
        kiln.jit(lambda x: x ** 300)(np.ones(3, np.int8))  # numpy's error; it wrapped to x ** 44


def test_comparisons_with_ints_past_the_dtype_answer_as_numpy():
    # numpy compares an int8 array with 1000 (all less); kiln raised OverflowError.
    x = np.array([-128, -1, 0, 127], np.int8)
    y = np.array([2**62 + 1, -(2**63), 2**63 - 1, 0], np.int64)
    cases = [lambda a: a < 1000, lambda a: a <= 128, lambda a: a > -129, lambda a: a >= 2**70,
             lambda a: a == 128, lambda a: a != -(2**64), lambda a: 1000 > a, lambda a: -129 < a,
             lambda a: a < 127, lambda a: a == 2**62 + 1, lambda a: a > 2**63 - 1]
    for fn in cases:
        for v in (x, y):
            got = kiln.jit(fn)(v)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, fn(v))
    # Arithmetic with them still raises, as numpy's.
    with pytest.raises(OverflowError, match="1000 out of bounds for int8"):
        kiln.jit(lambda a: a + 1000)(x)
    # True division is in float64: there the int is a float (it raised OverflowError).
    for fn in (lambda a: a / 1000, lambda a: 1000 / a, lambda a: a / 2**70):
        with np.errstate(divide="ignore"):  # numpy's reference: 1000 / 0 is inf
            want = fn(x)
        np.testing.assert_array_equal(kiln.jit(fn)(x), want)
