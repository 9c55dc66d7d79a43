"""The decorator: bare and with options, several outputs, captured constants, static_argnums,
dynamic shapes, stats(), inspect(), module functions, threads."""

import threading

import numpy as np
import pytest

import kiln
from conftest import assert_close, f64, rng_for


@pytest.mark.llvm
def test_bare_and_with_options():
    @kiln.jit
    def a(x):
        """doc of a"""
        return x + 1

    @kiln.jit(dynamic=False, cache=False)
    def b(x):
        return x + 2

    assert isinstance(a, kiln.JitFunction) and isinstance(b, kiln.JitFunction)
    assert a.__name__ == "a" and a.__doc__ == "doc of a" and a.__wrapped__ is not None
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(a(x), 1)
    np.testing.assert_array_equal(b(x), 2)
    assert kiln.jit(lambda x: x * 3)(x).tolist() == [0, 0, 0]


@pytest.mark.llvm
def test_several_outputs_are_a_tuple():
    f = kiln.jit(lambda x: (x + 1, x.sum(), [x][0] * 2))
    out = f(np.ones((2, 2), np.float32))
    assert isinstance(out, tuple) and len(out) == 3
    g = kiln.jit(lambda x: [x])
    assert isinstance(g(np.ones(2, np.float32)), tuple)


@pytest.mark.llvm
def test_captured_arrays_are_constants():
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = np.float32(0.5)

    @kiln.jit
    def f(x):
        return x @ w + b

    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(f(x), x @ w + b)
    assert "constant" in f.inspect(x).graph


@pytest.mark.llvm
def test_static_argnums():
    traces = []

    @kiln.jit(static_argnums=(1,))
    def f(x, n):
        traces.append(n)
        y = x
        for _ in range(n):  # a Python loop over a static value
            y = y * 2
        return y

    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(f(x, 2), 4)
    np.testing.assert_array_equal(f(x, 3), 8)
    np.testing.assert_array_equal(f(x, 2), 4)
    assert sorted(set(traces)) == [2, 3]
    assert f.stats()["traces"] == 2

    @kiln.jit(static_argnums=1)
    def g(x, axes):
        return x.sum(axis=axes)

    x2 = np.ones((2, 3, 4), np.float32)
    assert g(x2, (0, 2)).shape == (3,)
    with pytest.raises(TypeError, match="hashable"):
        g(x2, [0, 2])
    np.testing.assert_array_equal(g(x2, 1), 3)  # still usable


@pytest.mark.llvm
def test_dynamic_shapes_recompile_a_few_times():
    @kiln.jit
    def f(x):
        return kiln.softmax(x * 2, axis=-1)

    rng = rng_for("dyn")
    for n in [3, 5, 8, 13, 21, 34]:
        x = rng.normal(size=(n, 7)).astype(np.float32)
        e = np.exp(2 * f64(x) - 2 * f64(x).max(-1, keepdims=True))
        assert_close(f(x), e / e.sum(-1, keepdims=True), np.float32, k=7)
    s = f.stats()
    assert s["calls"] == 6
    assert s["compiles"] <= 3, s
    assert s["recompile_reasons"], s


@pytest.mark.llvm
@pytest.mark.parametrize("dynamic", [False, True, {"x": [0]}, {0: [0]}])
def test_dynamic_options(dynamic):
    f = kiln.jit(lambda x: x.sum(axis=-1), dynamic=dynamic)
    for n in [2, 3, 4]:
        np.testing.assert_allclose(f(np.ones((n, 5), np.float32)), np.full(n, 5.0))


def test_bad_options():
    with pytest.raises(ValueError):
        kiln.jit(lambda x: x, dynamic="sometimes")
    with pytest.raises(ValueError):
        kiln.jit(lambda x: x, device="tpu")
    with pytest.raises(ValueError):
        kiln.jit(lambda x: x, static_argnums=(3,))


@pytest.mark.llvm
def test_stats_and_inspect():
    @kiln.jit
    def f(x, w):
        return kiln.relu(x @ w + 1.0)

    x = np.ones((4, 8), np.float32)
    w = np.ones((8, 3), np.float32)
    f(x, w)
    f(x, w)
    s = f.stats()
    for key in ["calls", "compiles", "memory_hits", "disk_hits", "variants", "recompile_reasons"]:
        assert key in s
    # memory_hits: calls served by an executable already in memory (the second call here);
    # kernel_memory_hits: kernels a compile found in the in-memory kernel cache.
    assert s["calls"] == 2 and s["compiles"] == 1 and s["memory_hits"] == 1
    assert s["kernel_memory_hits"] >= 0
    g = kiln.jit(lambda x, w: kiln.relu(x @ w + 1.0))  # the same kernels, another Function
    g(x, w)
    assert g.stats()["compiles"] == 1 and g.stats()["kernel_memory_hits"] + g.stats()["disk_hits"] >= 1
    assert isinstance(s["recompile_reasons"], list)
    ins = f.inspect(x, w)
    assert isinstance(ins, kiln.Inspection)
    assert "matmul" in ins.graph
    assert ins.kernels and all(isinstance(k, kiln.KernelInfo) for k in ins.kernels)
    for k in ins.kernels:
        assert k.backend in ("x86", "llvm", "cuda")
        assert isinstance(k.name, str) and isinstance(k.key, str) and isinstance(k.asm, str)
        assert isinstance(k.source, str) and isinstance(k.ops, list)
        int(k.key, 16)


def test_module_functions(tmp_path):
    assert isinstance(kiln.cache_dir(), str) and kiln.cache_dir()
    info = kiln.device_info()
    assert isinstance(info, dict) and "report" in info
    assert info["isa"] in ("avx512", "avx2", "sse")
    assert isinstance(info["cpu_features"], list) and all(isinstance(f, str) for f in info["cpu_features"])
    assert set(info["cpu_features"]) <= set(info["cpu_features_hardware"])
    assert isinstance(info["cpu_brand"], str)
    assert info["num_cores"] >= 1 and info["num_threads"] >= 1
    for key in ("l1d_bytes", "l2_bytes", "l3_bytes"):
        assert isinstance(info[key], int) and info[key] >= 0
    assert isinstance(info["gpus"], list) and isinstance(info["gpu_status"], str)
    for g in info["gpus"]:
        assert isinstance(g["name"], str) and len(g["compute_capability"]) == 2 and g["memory_bytes"] > 0
    if not info["gpus"]:
        assert info["gpu_status"]
    # The LLVM version, or None in a build without LLVM; the doctor report says the same.
    assert info["llvm"] is None or (isinstance(info["llvm"], str) and info["llvm"])
    assert ("llvm: not built" in info["report"]) == (info["llvm"] is None)
    kiln.set_num_threads(2)
    with pytest.raises(ValueError):
        kiln.set_num_threads(0)
    kiln.clear_cache()
    f = kiln.jit(lambda a, b: a @ b)  # a kernel every build compiles (the x86 GEMM backend's)
    np.testing.assert_array_equal(f(np.ones((2, 3), np.float32), np.ones((3, 1), np.float32)), 3)


def test_dtypes_are_numpy_dtypes():
    assert kiln.float32 == np.float32 and kiln.int64 == np.int64 and kiln.bool_ == np.bool_
    assert kiln.float16 == np.float16 and kiln.int8 == np.int8 and kiln.int32 == np.int32
    assert kiln.float64 == np.float64 and kiln.bfloat16.name == "bfloat16"


@pytest.mark.llvm
def test_threads_calling_one_function():
    @kiln.jit
    def f(x, w):
        return kiln.tanh(x @ w)

    rng = rng_for("threads")
    w = rng.normal(size=(16, 16)).astype(np.float32)
    inputs = [rng.normal(size=(n, 16)).astype(np.float32) for n in (4, 8, 4, 8, 1, 4, 8, 4)]
    results, errors = {}, []

    def worker(i):
        try:
            for _ in range(20):
                results[i] = f(inputs[i], w)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, x in enumerate(inputs):
        assert_close(results[i], np.tanh(f64(x) @ f64(w)), np.float32, k=16)
    assert f.stats()["calls"] == 20 * len(inputs)


@pytest.mark.llvm
def test_methods_can_be_decorated():
    class Model:
        def __init__(self):
            self.scale = 3.0

        @kiln.jit(static_argnums=0)
        def forward(self, x):
            return x * self.scale

        def __hash__(self):
            return id(self)

    m = Model()
    np.testing.assert_array_equal(m.forward(np.ones(2, np.float32)), 3)


@pytest.mark.llvm
def test_repeated_calls_small_and_large_several_outputs():
    # The cache-hit paths of the extension: small calls (outputs allocated by numpy, GIL kept),
    # large calls (kiln's allocations, GIL released), one and several outputs, scalars.
    f = kiln.jit(lambda x, s: (x + s, x * s, -x, x - 1.0, x * 2.0))
    g = kiln.jit(lambda x: x * 2.0)
    for n in (8, 8, 100_000, 100_000, 8):
        x = np.arange(n, dtype=np.float32)
        for _ in range(3):
            outs = f(x, 2.0)
            assert isinstance(outs, tuple) and len(outs) == 5
            for got, want in zip(outs, (x + 2, x * 2, -x, x - 1, x * 2)):
                np.testing.assert_array_equal(got, want)
                assert got.flags.c_contiguous and got.flags.writeable
            y = g(x)
            np.testing.assert_array_equal(y, x * 2)
            y[:] = 0  # results own their memory: writing does not touch the next call's result
            np.testing.assert_array_equal(g(x), x * 2)
    # 2 shapes, each seen with a 64-byte aligned or unaligned array (part of the signature)
    assert 2 <= f.stats()["compiles"] <= 4 and f.stats()["calls"] == 15
    assert g.stats()["memory_hits"] == 30 - g.stats()["compiles"]


@pytest.mark.llvm
def test_python_scalars_do_not_recompile():
    f = kiln.jit(lambda x, a, b: x * a + b)
    x = np.ones(4, np.float32)
    for i in range(20):
        np.testing.assert_array_equal(f(x, float(i), i), i + i)
    assert f.stats()["compiles"] == 1


@pytest.mark.llvm
def test_python_int_arguments_out_of_a_narrow_dtype_raise_as_in_numpy():
    # numpy: int8_array + 300 raises OverflowError (NEP 50); the value is an argument, known only
    # at the call, and the cast to int8 is in the graph: it wrapped (300 became 44).
    f = kiln.jit(lambda x, s: x + s)
    x = np.arange(4, dtype=np.int8)
    np.testing.assert_array_equal(f(x, 100), x + 100)
    with pytest.raises(OverflowError, match=r"argument 1 \('s'\).*300 out of bounds for int8"):
        f(x, 300)  # known bound: raised before the call
    np.testing.assert_array_equal(f(x, -128), x + np.int8(-128))
    with pytest.raises(OverflowError, match=r"-129 out of bounds for int8"):
        kiln.jit(lambda x, s: x * s)(x, -129)  # the first call, the one that traces
    # A value used beside int32 and int8: the narrower bound holds (and a static argument takes
    # the other call path).
    g = kiln.jit(lambda y, x, s, k: (y - s + k, x + s), static_argnums=(3,))
    y = np.arange(4, dtype=np.int32)
    with pytest.raises(OverflowError, match=r"1000 out of bounds for int8"):
        g(y, x, 1000, 0)
    np.testing.assert_array_equal(g(y, x, 7, 1)[0], y - 6)
    # Where numpy converts: a float tensor, a float or bool argument, an int64 tensor.
    np.testing.assert_array_equal(f(np.ones(2, np.float32), 300), np.full(2, 301, np.float32))
    np.testing.assert_array_equal(f(x, 2.5), x + 2.5)
    np.testing.assert_array_equal(f(x, True), x + np.int8(1))
    big = 2**40
    np.testing.assert_array_equal(f(np.arange(3), big), np.arange(3) + big)
    assert f.stats()["compiles"] >= 1


@pytest.mark.llvm
def test_values_computed_from_python_int_arguments_are_bounded_as_in_numpy():
    # numpy computes 2 * s with Python ints, then raises OverflowError where the result meets an
    # int8 array out of its range; kiln computed it in int64 and wrapped it into int8 (x + 2 * 100
    # gave x - 56).
    x = np.arange(4, dtype=np.int8)
    f = kiln.jit(lambda x, s: x + 2 * s)
    for s in (63, -64, 0):
        np.testing.assert_array_equal(f(x, s), x + 2 * s)
    for s, value in ((64, 128), (-65, -130), (100, 200)):
        with pytest.raises(OverflowError, match=rf"argument 1 \('s'\).* is {s}, which makes 2 \* {s} \+ 0 = "
                                                rf"{value} .*integer {value} out of bounds for int8"):
            f(x, s)
    # Sums, differences, negation and products with constants, in any order.
    g = kiln.jit(lambda x, s: x - (3 - s) * -5 + 1)
    for s in (-22, 28, 0):
        np.testing.assert_array_equal(g(x, s), x - (3 - s) * -5 + 1)
    for s in (29, -23):
        with pytest.raises(OverflowError, match="out of bounds for int8"):
            g(x, s)
    h = kiln.jit(lambda x, s: x + (-s + 200))  # -s + 200 in int8's range: s in 73..328
    np.testing.assert_array_equal(h(x, 100), x + 100)
    with pytest.raises(OverflowError, match=r"makes -1 \* -1 \+ 200 = 201 "):
        h(x, -1)
    # The first call, the one that traces, raises too; int32 takes its own range.
    with pytest.raises(OverflowError, match=r"= 3000000000 .*out of bounds for int32"):
        kiln.jit(lambda y, s: y * (s * 3))(np.ones(2, np.int32), 10**9)
    # Such a value is computed in int64: past it, it wrapped (x + 2 * 2**62 on int64 gave x - 2**63,
    # where numpy raises; beside float32 and in a comparison numpy computes it exactly, and kiln
    # now raises rather than give the wrapped value).
    z = np.arange(3, dtype=np.int64)
    f64 = kiln.jit(lambda z, s: z + 2 * s)
    np.testing.assert_array_equal(f64(z, 2**62 - 1), z + 2 * (2**62 - 1))
    with pytest.raises(OverflowError, match=r"= 9223372036854775808: Python integer .* out of bounds for int64"):
        f64(z, 2**62)
    for fn, arr in ((lambda a, s: a + 2 * s, np.ones(2, np.float32)), (lambda a, s: a == 2 * s, z),
                    (lambda a, s: 2 * s, np.ones(1))):
        with pytest.raises(OverflowError, match="the dtype kiln computes it in"):
            kiln.jit(fn)(arr, 2**62)


@pytest.mark.llvm
def test_values_computed_from_several_python_int_arguments_are_bounded_as_in_numpy():
    # numpy computes s + t, s * t, (s - 2 * t) ** 2 and abs(s - t) with Python ints and raises
    # OverflowError where the value meets an int8 array out of its range; kiln computed them in
    # int64 and wrapped them into int8 (x + (100 + 28) gave x - 128).
    x = np.arange(-3, 4, dtype=np.int8)
    cases = [
        (lambda x, s, t: x + (s + t), [(10, 20), (100, 24), (-100, -25)], [(100, 28), (-100, -29), (2**62, 2**62)]),
        (lambda x, s, t: x + s * t, [(3, 4), (-8, 15), (124, 1)], [(30, 40), (-1, 129), (2**40, 2**40)]),
        (lambda x, s, t: x - (s - 2 * t) ** 2, [(3, 4), (11, 0), (-1, 5)], [(12, 0), (0, 6)]),
        (lambda x, s, t: abs(s - t) + x, [(-50, 70), (0, 0)], [(-60, 70), (70, -60)]),
        (lambda x, s, t: x + (t - s) * 3, [(1, 2), (-5, 30)], [(0, 43), (43, 0)]),
    ]
    for fn, fine, overflow in cases:
        f = kiln.jit(fn)
        for s, t in fine:
            np.testing.assert_array_equal(f(x, s, t), fn(x, s, t))
        for s, t in overflow:
            with pytest.raises(OverflowError):
                fn(x, s, t)  # numpy raises, so must kiln
            with pytest.raises(OverflowError, match=rf"argument 1 \('s'\) is {s}, argument 2 \('t'\) is {t}, "
                                                    r"which makes .* out of bounds for int8"):
                f(x, s, t)
        np.testing.assert_array_equal(f(x, *fine[0]), fn(x, *fine[0]))  # still usable
    with pytest.raises(OverflowError, match=r"which makes s \+ t = 128: Python integer 128 out of bounds for "
                                            r"int8 beside an int8 tensor"):
        kiln.jit(lambda x, s, t: x + (s + t))(x, 100, 28)  # the call that traces raises too
    # Beside a float, in a comparison or as an output the value must fit int64, where kiln computes
    # it (it wrapped: 2**32 * 2**32 gave 0); below that kiln gives numpy's answer.
    z = np.arange(3, dtype=np.float32)
    for fn in (lambda z, s, t: z + s * t, lambda z, s, t: z < s * t - 1, lambda z, s, t: (z, s * t)):
        f = kiln.jit(fn)
        got, want = f(z, 2**31, 2**31), fn(z, 2**31, 2**31)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g, w)
        with pytest.raises(OverflowError, match="out of bounds for int64, the dtype kiln computes it in"):
            f(z, 2**32, 2**32)
    # int64 powers: a negative exponent is a float in Python, past 2**64 is past int64.
    p = kiln.jit(lambda z, s, t: z + s**t)
    np.testing.assert_array_equal(p(z, 3, 5), z + 3**5)
    np.testing.assert_array_equal(p(z, -1, 2**40 + 1), z - 1)
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        p(z, 2, -1)
    with pytest.raises(OverflowError, match=r"2 \*\* 70 is past int64"):
        p(z, 2, 70)


@pytest.mark.llvm
def test_python_int_arguments_compare_with_narrow_integer_tensors_as_in_numpy():
    # numpy compares an int8 array with 1000 (all less); kiln narrowed 1000 to int8 and raised.
    x = np.array([-128, -1, 0, 127], np.int8)
    f = kiln.jit(lambda x, s: (x < s, s >= x, x == s, s != x))
    for s in (1000, -1000, 2**63 - 1, -(2**63), 127, 0):
        for got, want in zip(f(x, s), (x < s, s >= x, x == s, s != x)):
            np.testing.assert_array_equal(got, want)
    y = np.array([-(2**31), 5], np.int32)
    np.testing.assert_array_equal(kiln.jit(lambda y, s: y > s)(y, -(2**40)), [True, True])
    # True division takes it as a float, as numpy does (it was bounded to int8 and raised).
    np.testing.assert_array_equal(kiln.jit(lambda x, s: x / s)(x, 1000), x / 1000)
    nz = x[x != 0]
    np.testing.assert_array_equal(kiln.jit(lambda x, s: (s + 1) / x)(nz, 2**40), (2**40 + 1) / nz)


@pytest.mark.llvm
def test_wrong_calls_raise_and_function_stays_usable():
    f = kiln.jit(lambda x: x + 1)
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(f(x), 1)
    with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
        f(x, x)
    with pytest.raises(kiln.DTypeError, match="argument 0"):
        f("not an array")
    with pytest.raises(TypeError):
        f(y=x)
    np.testing.assert_array_equal(f(x=x), 1)
    np.testing.assert_array_equal(f(x), 1)


@pytest.mark.llvm
def test_big_calls_run_in_parallel_threads():
    # Large inputs release the GIL: two threads each run their calls to completion concurrently
    # (checked for correctness, not timed: a test never fails because the machine is slow).
    f = kiln.jit(lambda x: kiln.tanh(x) * 2.0)
    xs = [np.full(1 << 18, i, np.float32) for i in range(4)]
    out = {}

    def worker(i):
        for _ in range(5):
            out[i] = f(xs[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_allclose(out[i], np.tanh(np.float32(i)) * 2, rtol=2e-6)
