"""Bad inputs get typed errors that name the argument, and the function stays usable; errors
while tracing point at the user's line."""

import traceback

import numpy as np
import pytest

import kiln


def test_exception_hierarchy():
    assert issubclass(kiln.ShapeError, kiln.Error) and issubclass(kiln.ShapeError, ValueError)
    assert issubclass(kiln.DTypeError, kiln.Error) and issubclass(kiln.DTypeError, TypeError)
    assert issubclass(kiln.CompileError, kiln.Error) and issubclass(kiln.CompileError, RuntimeError)
    assert issubclass(kiln.DeviceError, kiln.Error) and issubclass(kiln.DeviceError, RuntimeError)
    assert kiln.ShapeError.__module__ == "kiln"


@kiln.jit
def add(x, w):
    return x + w


def _ok():
    np.testing.assert_array_equal(add(np.ones(2, np.float32), np.ones(2, np.float32)), 2)


@pytest.mark.llvm
def test_wrong_number_of_arguments():
    _ok()
    with pytest.raises(TypeError, match=r"add\(\) takes 2 positional arguments but 1 was given"):
        add(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="3 were given"):
        add(np.ones(2), np.ones(2), np.ones(2))
    _ok()


@pytest.mark.parametrize("bad", [np.ones(2, np.uint8), np.ones(2, np.complex64), np.ones(2, np.int16),
                                 np.array(["a", "b"]), np.ones(2, object)], ids=lambda a: str(a.dtype))
@pytest.mark.llvm
def test_unsupported_dtype_names_the_argument(bad):
    with pytest.raises(kiln.DTypeError, match=r"argument 1 \('w'\) of add\(\).*unsupported dtype"):
        add(np.ones(2, np.float32), bad)
    _ok()


@pytest.mark.llvm
@pytest.mark.parametrize("bad", [[1.0, 2.0], "abc", None, {"a": 1}, 1 + 2j])
def test_non_array_objects(bad):
    with pytest.raises(kiln.DTypeError, match=r"argument 0 \('x'\) of add\(\)"):
        add(bad, np.ones(2, np.float32))
    _ok()


def test_shape_that_breaks_the_traced_program():
    f = kiln.jit(lambda x, w: x @ w)
    f(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(kiln.ShapeError):
        f(np.ones((2, 3), np.float32), np.ones((5, 4), np.float32))
    with pytest.raises(kiln.ShapeError):
        f(np.ones((2, 3), np.float32), np.ones((3,), np.float32)[None, None, None])
    np.testing.assert_array_equal(f(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)), 3)


@pytest.mark.llvm
def test_tracing_error_points_at_the_users_line():
    @kiln.jit
    def bad(x, y):
        z = x * 2
        return z @ y  # the failing line

    with pytest.raises(kiln.ShapeError) as info:
        bad(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    msg = str(info.value)
    assert "test_errors.py:" in msg
    line = [ln for ln in msg.split("test_errors.py:")[1:]][0].split()[0].strip(":)")
    src = open(__file__).read().splitlines()[int(line) - 1]
    assert "the failing line" in src
    tb = traceback.extract_tb(info.value.__traceback__)
    assert tb[-1].name == "bad" and "the failing line" in tb[-1].line
    assert not any("/kiln/" in fr.filename and "site-packages" in fr.filename for fr in tb)
    # still usable with good shapes
    assert bad(np.ones((2, 3), np.float32), np.ones((3, 5), np.float32)).shape == (2, 5)


def test_python_errors_in_the_function_propagate_unchanged():
    @kiln.jit
    def oops(x):
        return x + undefined_name  # noqa: F821

    with pytest.raises(NameError):
        oops(np.ones(2, np.float32))
    with pytest.raises(NameError):  # not cached: raises again
        oops(np.ones(2, np.float32))


def test_data_dependent_control_flow_is_refused():
    @kiln.jit
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(kiln.Error, match="control flow"):
        branchy(np.ones(2, np.float32))


def test_bad_outputs():
    with pytest.raises(TypeError, match="returned a NoneType"):
        kiln.jit(lambda x: None)(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="returned a str"):
        kiln.jit(lambda x: (x, "no"))(np.ones(2, np.float32))


def test_numpy_inside_the_trace_is_refused_clearly():
    f = kiln.jit(lambda x: np.exp(x))
    with pytest.raises(TypeError):
        f(np.ones(2, np.float32))


def test_bfloat16_without_ml_dtypes_message():
    from kiln import _dtypes

    assert _dtypes.name_of("bfloat16") == "bfloat16"
    with pytest.raises(kiln.DTypeError):
        _dtypes.name_of(np.uint16)


def test_cuda_device_is_a_device_error_not_a_cpu_run():
    # No backend compiles for a GPU yet: on every machine, with or without one, a function asked
    # for "cuda" is refused with a DeviceError, call after call, instead of running on the CPU.
    for device in ("cuda", "cuda:1"):
        f = kiln.jit(lambda x: x + 1, device=device)
        for _ in range(2):
            with pytest.raises(kiln.DeviceError, match=f'device "{device}".*no CUDA backend'):
                f(np.ones(2, np.float32))


@pytest.mark.llvm
def test_shapes_whose_element_count_overflows_are_shape_errors():
    # The count wrapped in int64 and passed reshape's check: the kernel walked 2^62 rows (SIGSEGV);
    # a wrapped broadcast divided by zero while compiling (SIGFPE).
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(kiln.ShapeError, match="reshape"):
        kiln.jit(lambda x: x.reshape(2**62 + 1, 4).sum(axis=0))(x)
    with pytest.raises(kiln.ShapeError, match="reshape"):
        kiln.jit(lambda x: x.reshape(-1, 2**62, 4).sum())(x)
    with pytest.raises(kiln.ShapeError, match="broadcast_to"):
        kiln.jit(lambda x: kiln.broadcast_to(x, (2**40, 2**40, 4)).sum())(x)
    with pytest.raises(kiln.ShapeError, match="at most 64"):
        kiln.jit(lambda x: x.reshape((1,) * 65 + (4,)).sum())(x)
    img, w = np.ones((1, 1, 1, 1), np.float32), np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(kiln.ShapeError, match="overflow"):
        kiln.jit(lambda a, b: kiln.conv2d(a, b, padding=(1, 6148914691236517205)))(img, w)
    np.testing.assert_array_equal(kiln.jit(lambda x: x.reshape(2, 2))(x), x.reshape(2, 2))


@pytest.mark.llvm
def test_a_recursive_call_while_tracing_is_an_error_not_a_deadlock():
    # The inner call waited for the compile of its own signature, which waited for the trace.
    @kiln.jit
    def f(x):
        f(np.ones(3, np.float32))
        return x + 1

    with pytest.raises(kiln.CompileError, match="while it was being traced"):
        f(np.ones(3, np.float32))

    @kiln.jit
    def g(x):  # another signature: an ordinary nested call
        return x + h(np.ones(2, np.float32)).sum()

    @kiln.jit
    def h(y):
        return y * 2

    np.testing.assert_array_equal(g(np.zeros(3, np.float32)), 4)


def test_an_uninitialized_jit_function_is_a_type_error():
    g = kiln.JitFunction.__new__(kiln.JitFunction)
    with pytest.raises(TypeError, match="never initialized"):
        g()

    class Forgetful(kiln.JitFunction):
        def __init__(self, fn):  # no super().__init__
            self.fn_ = fn

    with pytest.raises(TypeError, match="never initialized"):
        Forgetful(lambda x: x)(np.ones(2, np.float32))


@pytest.mark.llvm
def test_a_tensor_kept_from_another_trace_is_an_error():
    # It read that trace's input 0, which the new graph bound to its own argument 0: g(y) gave
    # y + 2 * y, silently (and a float32/int32 mix failed in the verifier, as an internal error).
    saved = []

    @kiln.jit
    def f(x):
        saved.append(x * 2)
        return x + 1

    a = np.arange(3, dtype=np.float32)
    f(a)
    for arg in [a + 10, np.arange(3, dtype=np.int32)]:
        with pytest.raises(kiln.CompileError, match="another trace"):
            kiln.jit(lambda y: y + saved[0])(arg)
    np.testing.assert_array_equal(f(a), a + 1)  # f itself is unaffected


def test_options_and_arguments_out_of_range_name_what_is_wrong():
    # They were taken in silence (static_argnums=(1.9,) as 1; dynamic dims past the rank, or for
    # an argument the function lacks, ignored) or failed in nanobind's "incompatible function
    # arguments" (ints past int64).
    with pytest.raises(TypeError, match="static_argnums is an argument index or a list of them"):
        kiln.jit(lambda x, s: x, static_argnums=(1.9,))
    with pytest.raises(ValueError, match="static_argnums holds 1099511627776, out of range"):
        kiln.jit(lambda *xs: xs[0], static_argnums=(2**40,))
    with pytest.raises(ValueError, match="dynamic names argument 3, but the function takes 1"):
        kiln.jit(lambda x: x, dynamic={3: [0]})
    with pytest.raises(TypeError, match=r"dynamic\[0\] is a dim index or a list of them"):
        kiln.jit(lambda x: x, dynamic={0: [0.5]})
    with pytest.raises(ValueError, match="max_variants is a count"):
        kiln.jit(lambda x: x, max_variants=2**70)
    with pytest.raises(ValueError, match="max_variants is a count"):
        kiln.jit(lambda x: x, max_variants=-1)
    with pytest.raises(TypeError, match="set_num_threads: expected an int"):
        kiln.set_num_threads(1.5)
    with pytest.raises(ValueError, match=r"expected 1 <= n <= 1024, got 2000"):
        kiln.set_num_threads(2000)
    with pytest.raises(ValueError, match=r"expected 1 <= n <= 1024"):
        kiln.set_num_threads(2**70)


@pytest.mark.llvm
def test_dims_and_constants_the_call_meets():
    x = np.ones((2, 3), np.float32)
    # A dim the argument does not have: a ShapeError at the call that meets it.
    for d in (2, -3):
        with pytest.raises(kiln.ShapeError, match=rf"input 0 has 2 dims, so its dim {d} does not"):
            kiln.jit(lambda a: a * 2, dynamic={0: [d]})(x)
    np.testing.assert_array_equal(kiln.jit(lambda a: a * 2, dynamic={0: [-1]})(x), x * 2)
    with pytest.raises(kiln.ShapeError, match="does not fit in int64"):
        kiln.jit(lambda a: a.reshape(2**70, 1))(x)
    # A captured big-endian constant is taken as its value (a big-endian input already was).
    be = np.arange(6, dtype=">f4").reshape(2, 3)
    np.testing.assert_array_equal(kiln.jit(lambda a: a + be)(x), x + be)
