"""Reductions (functions and methods), softmax, log_softmax, layer_norm and rms_norm against numpy,
over axes None / int / negative / tuple, keepdims, sizes 0 and 1; hypothesis for shapes and axes."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiln
from conftest import (ALL_DTYPES, BF16, FLOAT_DTYPES, assert_close, dtype_id, f64, is_float, np_layer_norm,
                      np_log_softmax, np_rms_norm, np_softmax, random_array, rng_for)

AXES = [None, 0, -1, 1, (0, 2), (-1, -3), ()]


def numpy_reduce(name, x, axis, keepdims):
    fn = getattr(np, name)
    if x.dtype == BF16:
        return fn(x.astype(np.float32), axis=axis, keepdims=keepdims).astype(BF16)
    return fn(x, axis=axis, keepdims=keepdims)


def reduce_k(shape, axis):
    if axis is None:
        return int(np.prod(shape))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([shape[a] for a in axes])) if axes else 1


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reductions(name, dtype):
    dtype = np.dtype(dtype)
    rng = rng_for(name, dtype)
    x = random_array(rng, (3, 4, 5), dtype)
    for axis in AXES:
        for keepdims in (False, True):
            use_method = keepdims  # methods and functions are both covered
            if use_method:
                f = kiln.jit(lambda x: getattr(x, name)(axis=axis, keepdims=keepdims))
            else:
                f = kiln.jit(lambda x: getattr(kiln, name)(x, axis, keepdims=keepdims))
            y = f(x)
            want = numpy_reduce(name, x, axis, keepdims)
            assert y.shape == want.shape, (name, axis, keepdims)
            assert y.dtype == want.dtype, (name, dtype, y.dtype, want.dtype)
            if is_float(want.dtype) and name in ("sum", "mean"):
                ref = getattr(np, name)(f64(x), axis=axis, keepdims=keepdims)
                assert_close(y, ref, want.dtype, k=reduce_k(x.shape, axis))
            else:
                np.testing.assert_array_equal(f64(y), f64(want))


@pytest.mark.llvm
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reductions_sizes_0_and_1(name):
    f = kiln.jit(lambda x: getattr(kiln, name)(x, axis=0))
    x = np.ones((1, 3), np.float32) * 2
    np.testing.assert_array_equal(f(x), getattr(np, name)(x, axis=0))
    if name == "sum":
        z = np.ones((0, 3), np.float32)
        np.testing.assert_array_equal(f(z), np.zeros(3, np.float32))
    f_all = kiln.jit(lambda x: getattr(x, name)())
    np.testing.assert_array_equal(f_all(np.float32(5.0) * np.ones((1, 1), np.float32)), 5.0)


def test_reduction_axis_out_of_range():
    f = kiln.jit(lambda x: x.sum(axis=2))
    with pytest.raises(kiln.ShapeError):
        f(np.ones((2, 3), np.float32))


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(dtype, axis):
    rng = rng_for("softmax", dtype, axis)
    x = random_array(rng, (4, 7, 5), dtype, -5, 5)
    y1 = kiln.jit(lambda x: kiln.softmax(x, axis=axis))(x)
    y2 = kiln.jit(lambda x: kiln.log_softmax(x, axis))(x)
    assert y1.dtype == np.dtype(dtype) and y2.dtype == np.dtype(dtype)
    assert_close(y1, np_softmax(f64(x), axis), dtype, k=x.shape[axis])
    assert_close(y2, np_log_softmax(f64(x), axis), dtype, k=x.shape[axis])


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax_together(dtype, axis):
    # One function returning both: their shared subexpressions become temporaries between kernels.
    rng = rng_for("softmax", dtype, axis)
    x = random_array(rng, (4, 7, 5), dtype, -5, 5)
    y1, y2 = kiln.jit(lambda x: (kiln.softmax(x, axis=axis), kiln.log_softmax(x, axis)))(x)
    assert_close(y1, np_softmax(f64(x), axis), dtype, k=x.shape[axis])
    assert_close(y2, np_log_softmax(f64(x), axis), dtype, k=x.shape[axis])


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("together", [False, True], ids=["separate", "together"])
def test_layer_norm(dtype, together):
    rng = rng_for("layer_norm", dtype)
    x = random_array(rng, (3, 5, 16), dtype, -3, 3)
    w = random_array(rng, (16,), dtype, 0.5, 1.5)
    b = random_array(rng, (16,), dtype, -1, 1)
    fns = (lambda x, w, b: kiln.layer_norm(x), lambda x, w, b: kiln.layer_norm(x, w, b, eps=1e-3),
           lambda x, w, b: kiln.layer_norm(x, weight=w))
    if together:  # the three share mean and variance: temporaries between kernels
        y0, y1, y2 = kiln.jit(lambda x, w, b: tuple(fn(x, w, b) for fn in fns))(x, w, b)
    else:
        y0, y1, y2 = (kiln.jit(fn)(x, w, b) for fn in fns)
    assert y0.dtype == np.dtype(dtype)
    assert_close(y0, np_layer_norm(f64(x)), dtype, k=16)
    assert_close(y1, np_layer_norm(f64(x), f64(w), f64(b), eps=1e-3), dtype, k=16)
    assert_close(y2, np_layer_norm(f64(x), f64(w)), dtype, k=16)


@pytest.mark.llvm
def test_layer_norm_other_axis():
    x = rng_for("ln-axis").normal(size=(6, 4)).astype(np.float32)
    y = kiln.jit(lambda x: kiln.layer_norm(x, axis=0))(x)
    assert_close(y, np_layer_norm(f64(x), axis=0), np.float32, k=6)


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_rms_norm(dtype):
    rng = rng_for("rms_norm", dtype)
    x = random_array(rng, (4, 32), dtype, -3, 3)
    w = random_array(rng, (32,), dtype, 0.5, 1.5)
    y0, y1 = kiln.jit(lambda x, w: (kiln.rms_norm(x), kiln.rms_norm(x, w, eps=1e-5)))(x, w)
    assert_close(y0, np_rms_norm(f64(x)), dtype, k=32)
    assert_close(y1, np_rms_norm(f64(x), f64(w), eps=1e-5), dtype, k=32)


@st.composite
def shape_and_axes(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    if ndim == 0:
        return shape, None
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return shape, None
    if kind == "int":
        return shape, draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return shape, tuple(a - ndim if draw(st.booleans()) else a for a in axes)


@pytest.mark.llvm
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape_and_axes(), st.booleans(), st.sampled_from(["sum", "max", "mean"]))
def test_reduction_axes_hypothesis(sa, keepdims, name):
    shape, axis = sa
    if name == "max" and 0 in shape:
        # numpy raises for an empty max over the reduced axes; keep to non-empty inputs
        shape = tuple(max(d, 1) for d in shape)
    x = rng_for(shape, axis, name).normal(size=shape).astype(np.float32)
    y = kiln.jit(lambda x: getattr(kiln, name)(x, axis=axis, keepdims=keepdims))(x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = getattr(np, name)(f64(x), axis=axis, keepdims=keepdims)
    assert y.shape == want.shape
    assert_close(y, want, np.float32, k=max(1, x.size))
