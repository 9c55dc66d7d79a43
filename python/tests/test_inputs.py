"""What a call takes and returns: every dtype, every layout (strided, Fortran, negative strides,
offset views, byte-swapped, unaligned), __dlpack__ objects, numpy scalars; outputs are numpy arrays
that own their memory."""

import gc

import numpy as np
import pytest

import kiln
from conftest import assert_close, ALL_DTYPES, BF16, dtype_id, f64, random_array, rng_for

# Every test here compiles kernels only the LLVM backend builds (see conftest.py).
pytestmark = pytest.mark.llvm


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_every_dtype_round_trips(dtype):
    x = random_array(rng_for("rt", dtype), (3, 4), dtype)
    y = kiln.jit(lambda x: x[::-1])(x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(f64(y), f64(x[::-1]))


def _layouts(base):
    return {
        "contiguous": base,
        "fortran": np.asfortranarray(base),
        "transposed": base.T,
        "strided": base[::2, ::3],
        "negative": base[::-1, ::-2],
        "offset": base[1:, 2:],
        "broadcast_view": np.broadcast_to(base[:1], base.shape),
        "column": base[:, 3],
    }


@pytest.mark.parametrize("layout", list(_layouts(np.zeros((6, 8)))))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64] + ([BF16] if BF16 else []), ids=dtype_id)
def test_layouts_without_copies(layout, dtype):
    rng = rng_for("layout", layout, dtype)
    base = random_array(rng, (6, 8), dtype)
    x = _layouts(base)[layout]
    f = kiln.jit(lambda x: x * 2 + 1)
    y = f(x)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(y, x * 2 + 1)
    else:
        assert_close(y, f64(x) * 2 + 1, dtype)
    assert y.flags.c_contiguous


def test_byte_swapped_and_unaligned_inputs_are_copied_correctly():
    x = np.arange(12, dtype=">f4").reshape(3, 4)
    f = kiln.jit(lambda x: x + 1)
    np.testing.assert_array_equal(f(x), x.astype(np.float32) + 1)
    buf = np.zeros(4 * 12 + 1, np.uint8)
    unaligned = buf[1:].view(np.float32).reshape(3, 4)
    unaligned[...] = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(f(unaligned), unaligned + 1)


def test_inputs_are_not_modified_and_outputs_are_fresh():
    x = np.arange(6, dtype=np.float32)
    keep = x.copy()
    f = kiln.jit(lambda x: x)
    y = f(x)
    np.testing.assert_array_equal(x, keep)
    y[0] = 100
    assert x[0] == 0


def test_outputs_own_their_memory():
    f = kiln.jit(lambda x: (x + 1, x * 2))
    a, b = f(np.ones((4, 4), np.float32))
    del f
    gc.collect()
    a2 = a.copy()
    for _ in range(3):  # other calls must not reuse the buffers we hold
        g = kiln.jit(lambda x: x - 5)
        g(np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, 2)
    assert a.flags.writeable
    a += 1  # writable, in place


def test_dlpack_input():
    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = np.arange(10, dtype=np.float32)
    y = kiln.jit(lambda x: x * 3)(DL(x))
    np.testing.assert_array_equal(y, x * 3)


def test_numpy_scalar_and_zero_d_inputs():
    f = kiln.jit(lambda x, y: x + y)
    out = f(np.float32(2.0), np.array(3.0, np.float32))
    assert out.shape == () and out.dtype == np.float32 and out == 5


def test_empty_and_size_one_inputs():
    f = kiln.jit(lambda x: x * 2)
    for shape in [(0,), (0, 5), (1,), (1, 1, 1), (5, 0, 2)]:
        y = f(np.ones(shape, np.float32))
        assert y.shape == shape
        np.testing.assert_array_equal(y, 2 * np.ones(shape))


def test_keyword_arguments_and_defaults():
    @kiln.jit
    def f(x, y, scale=2.0):
        return x * scale + y

    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(f(x, y=x), 3.0)
    np.testing.assert_array_equal(f(x, x, scale=4.0), 5.0)
    np.testing.assert_array_equal(f(y=x, x=x), 3.0)
