"""Views and layout ops against numpy: reshape, transpose, .T, broadcast_to, concatenate, astype,
basic indexing; hypothesis for broadcasting."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiln
from conftest import ALL_DTYPES, BF16, assert_close, dtype_id, f64, random_array, rng_for


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_layout_ops_every_dtype(dtype):
    rng = rng_for("layout", dtype)
    x = random_array(rng, (2, 3, 4), dtype)

    @kiln.jit
    def f(x):
        return (x.reshape(6, 4), kiln.reshape(x, (4, -1)), x.transpose(), kiln.transpose(x, (1, 0, 2)),
                x.T, kiln.broadcast_to(x[:, :1, :], (2, 3, 4)), x[1, ::2, 1:3], x[..., None])

    outs = f(x)
    wants = (x.reshape(6, 4), x.reshape(4, -1), x.transpose(), x.transpose(1, 0, 2), x.T,
             np.broadcast_to(x[:, :1, :], (2, 3, 4)), x[1, ::2, 1:3], x[..., None])
    assert len(outs) == len(wants)
    for y, w in zip(outs, wants):
        assert y.dtype == w.dtype and y.shape == w.shape
        np.testing.assert_array_equal(f64(y), f64(w))


INDEXES = [
    np.s_[1:5], np.s_[:, ::2], np.s_[..., None], np.s_[0], np.s_[-1], np.s_[::-1], np.s_[1:-1, 2],
    np.s_[None, :, 1], np.s_[..., 0], np.s_[2:0:-1, ::-3], np.s_[100:], np.s_[:, -100:2], np.s_[0, 0],
    np.s_[()], np.s_[np.int64(2)],
]


@pytest.mark.llvm
@pytest.mark.parametrize("idx", INDEXES, ids=repr)
def test_basic_indexing(idx):
    x = np.arange(6 * 7, dtype=np.float32).reshape(6, 7)
    y = kiln.jit(lambda x: x[idx])(x)
    want = x[idx]
    assert y.shape == want.shape
    np.testing.assert_array_equal(y, want)


def test_advanced_indexing_is_refused():
    f = kiln.jit(lambda x: x[np.array([0, 1])])
    with pytest.raises(IndexError, match="basic indexing"):
        f(np.ones(3, np.float32))


@pytest.mark.llvm
@pytest.mark.parametrize("src", ALL_DTYPES, ids=dtype_id)
def test_astype_every_pair(src):
    rng = rng_for("astype", src)
    x = random_array(rng, (11,), src, -5, 5)
    targets = ALL_DTYPES

    def f(x):
        return tuple(x.astype(t) for t in targets[:4]) + tuple(kiln.astype(x, t) for t in targets[4:])

    outs = kiln.jit(f)(x)
    for t, y in zip(targets, outs):
        assert y.dtype == np.dtype(t)
        if BF16 is not None and (np.dtype(src) == BF16 or np.dtype(t) == BF16):
            want = x.astype(np.float32).astype(t) if np.dtype(src) == BF16 else x.astype(t)
        else:
            want = x.astype(t)
        if np.dtype(t).kind in "f" or np.dtype(t) == BF16:
            np.testing.assert_array_equal(f64(y), f64(want))
        else:
            # float -> int truncates toward zero, as numpy (values are in range)
            np.testing.assert_array_equal(y, want)


@pytest.mark.llvm
def test_astype_accepts_kiln_numpy_and_names():
    x = np.arange(4, dtype=np.float32)
    f = kiln.jit(lambda x: (x.astype(kiln.int32), x.astype(np.float16), x.astype("float64"), x.astype(bool)))
    a, b, c, d = f(x)
    assert (a.dtype, b.dtype, c.dtype, d.dtype) == (np.int32, np.float16, np.float64, np.bool_)


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_], ids=dtype_id)
def test_concatenate(dtype):
    rng = rng_for("concat", dtype)
    a = random_array(rng, (2, 3), dtype)
    b = random_array(rng, (4, 3), dtype)
    c = random_array(rng, (2, 5), dtype)
    y0, y1 = kiln.jit(lambda a, b, c: (kiln.concatenate([a, b]), kiln.concatenate((a, c), axis=-1)))(a, b, c)
    np.testing.assert_array_equal(y0, np.concatenate([a, b]))
    np.testing.assert_array_equal(y1, np.concatenate([a, c], axis=-1))


@pytest.mark.llvm
def test_concatenate_promotes_and_takes_constants():
    a = np.ones((2, 2), np.float32)
    k = np.arange(4, dtype=np.int8).reshape(2, 2)
    y = kiln.jit(lambda a: kiln.concatenate([a, k], axis=0))(a)
    want = np.concatenate([a, k], axis=0)
    assert y.dtype == want.dtype
    np.testing.assert_array_equal(y, want)


@pytest.mark.llvm
def test_shape_properties_while_tracing():
    seen = {}

    @kiln.jit(dynamic=False)
    def f(x):
        seen["shape"], seen["dtype"], seen["ndim"] = x.shape, x.dtype, x.ndim
        seen["T"] = x.T.shape
        seen["repr"] = repr(x)
        assert isinstance(x, kiln.Tensor)
        return x.reshape(x.shape[1], x.shape[0])

    x = np.ones((2, 3), np.float32)
    assert f(x).shape == (3, 2)
    assert seen["shape"] == (2, 3) and seen["ndim"] == 2 and seen["T"] == (3, 2)
    assert seen["dtype"] == kiln.float32 and seen["dtype"] == np.float32
    assert "kiln.Tensor" in seen["repr"]


@st.composite
def broadcastable_pair(draw):
    nd = draw(st.integers(0, 4))
    base = draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd))
    a, b = [], []
    for d in base:
        a.append(draw(st.sampled_from([d, 1])))
        b.append(draw(st.sampled_from([d, 1])))
    a = a[draw(st.integers(0, nd)):]  # drop leading dims of one side
    return tuple(a), tuple(b)


@pytest.mark.llvm
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broadcastable_pair(), st.sampled_from(["add", "mul", "maximum", "where"]))
def test_broadcasting_hypothesis(shapes, op):
    sa, sb = shapes
    rng = rng_for(sa, sb, op)
    a = rng.normal(size=sa).astype(np.float32)
    b = rng.normal(size=sb).astype(np.float32)
    if op == "where":
        f = kiln.jit(lambda a, b: kiln.where(a > b, a, b))
        want = np.where(a > b, a, b)
    else:
        f = kiln.jit(lambda a, b: getattr(kiln, op)(a, b) if op == "maximum" else (a + b if op == "add" else a * b))
        want = {"add": np.add, "mul": np.multiply, "maximum": np.maximum}[op](a, b)
    y = f(a, b)
    assert y.shape == want.shape
    assert_close(y, want, np.float32)


def test_broadcast_error_is_a_shape_error():
    f = kiln.jit(lambda a, b: a + b)
    with pytest.raises(kiln.ShapeError):
        f(np.ones((2, 3), np.float32), np.ones((4,), np.float32))


@pytest.mark.llvm
@pytest.mark.parametrize("target", [np.int8, np.int32], ids=dtype_id)
def test_astype_float_to_int_truncates_and_wraps(target):
    # kiln's rule (numpy leaves it undefined): truncate toward zero, then wrap like two's complement.
    x = np.array([65520.0, -65521.5, 300.7, -129.9, 127.9, 3e9, -2.5, 0.99], np.float32)
    y = kiln.jit(lambda x: x.astype(target))(x)
    want = np.trunc(x.astype(np.float64)).astype(np.int64).astype(target)
    np.testing.assert_array_equal(y, want)
