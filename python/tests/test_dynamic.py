"""Dynamic shapes from Python: the dynamic= policies, symbolic dims as the traced function sees
them, the fallback to exact dims for programs that cannot take them symbolic, and the counters."""

import numpy as np
import pytest

import kiln
from conftest import assert_close, f64, rng_for


def ref_mlp(x, w1, b1, w2):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    h = (x - mu) / np.sqrt(var + 1e-5) @ w1 + b1
    h = np.maximum(h, 0)
    return x + h @ w2


@pytest.mark.llvm
def test_serving_loop_compiles_a_handful_of_times():
    rng = rng_for("serving")
    w1 = rng.normal(size=(32, 64)).astype(np.float32) / 6
    b1 = rng.normal(size=64).astype(np.float32)
    w2 = rng.normal(size=(64, 32)).astype(np.float32) / 8

    @kiln.jit
    def block(x, w1, b1, w2):
        return x + kiln.relu(kiln.layer_norm(x) @ w1 + b1) @ w2

    lengths = rng.permutation(np.arange(1, 201))
    for i, t in enumerate(lengths):
        x = rng.normal(size=(int(t), 32)).astype(np.float32)
        y = block(x, w1, b1, w2)
        assert y.shape == (t, 32)
        if i < 20 or i % 10 == 0:
            assert_close(y, ref_mlp(f64(x), f64(w1), f64(b1), f64(w2)), np.float32, k=64)
    s = block.stats()
    assert s["calls"] == 200
    assert s["compiles"] <= 3, s["recompile_reasons"]
    assert s["variants"] == s["compiles"]
    assert any("now symbolic" in r for r in s["recompile_reasons"]), s["recompile_reasons"]


@pytest.mark.llvm
def test_symbolic_dims_inside_the_trace():
    seen = []

    @kiln.jit(dynamic=True, cache=False)
    def f(x):
        seen.append((repr(x.shape), str(x.shape[0])))
        return (x.reshape(-1, 4, 2) * 2).sum(axis=-1).reshape(-1, 4)

    for n in [3, 5, 17]:
        x = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
        np.testing.assert_allclose(f(x), (x.reshape(n, 4, 2) * 2).sum(-1))
    # dim 1 feeds a reshape that merges it, so it stays exact; dim 0 is one symbol.
    assert seen[-1] == ("(s0, 8)", "s0"), seen
    s = f.stats()
    assert s["compiles"] == 1, s["recompile_reasons"]
    assert any("arg 0 dim 1: kept exact" in r for r in s["recompile_reasons"])


@pytest.mark.llvm
def test_python_arithmetic_on_a_symbolic_dim_keeps_it_exact():
    @kiln.jit(cache=False)
    def f(x):
        return x / x.shape[0]

    for n in [3, 5, 7]:
        np.testing.assert_allclose(f(np.ones((n, 4), np.float32)), np.full((n, 4), 1 / n), rtol=1e-6)
    s = f.stats()
    assert s["compiles"] == 3
    assert any("kept exact" in r for r in s["recompile_reasons"]), s["recompile_reasons"]


@pytest.mark.llvm
def test_size_of_a_symbolic_dim_keeps_it_exact():
    # x.size counted a symbolic dim as 0: from the second length on, x.sum() / x.size was inf.
    @kiln.jit(cache=False)
    def mean(x):
        return x.sum() / x.size

    for n in [4, 6, 8]:
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_allclose(mean(x), x.mean(), rtol=1e-6)
    assert any("kept exact" in r for r in mean.stats()["recompile_reasons"])


@pytest.mark.llvm
@pytest.mark.parametrize("dynamic", [True, {"x": [0]}, {0: [-2]}])
def test_policies_that_make_the_rows_symbolic(dynamic):
    @kiln.jit(dynamic=dynamic, cache=False)
    def f(x, b):
        return kiln.softmax(x + b, axis=-1)

    rng = rng_for("policies")
    b = rng.normal(size=24).astype(np.float32)
    for n in [2, 3, 9, 40]:
        x = rng.normal(size=(n, 24)).astype(np.float32)
        z = f64(x) + f64(b)
        e = np.exp(z - z.max(-1, keepdims=True))
        assert_close(f(x, b), e / e.sum(-1, keepdims=True), np.float32, k=24)
    assert f.stats()["compiles"] == 1, f.stats()["recompile_reasons"]


@pytest.mark.llvm
def test_rows_of_0_and_1_take_their_own_variants():
    @kiln.jit(dynamic=True, cache=False)
    def f(x, b):
        return (x * b).sum(axis=0)

    b = np.arange(5, dtype=np.float32)
    for n in [4, 1, 0, 6, 1]:
        x = np.ones((n, 5), np.float32)
        np.testing.assert_allclose(f(x, b), n * b)
    assert f.stats()["compiles"] == 3


@pytest.mark.llvm
def test_variant_bound_is_counted():
    @kiln.jit(dynamic=False, max_variants=2, cache=False)
    def f(x):
        return x + 1

    for n in range(2, 8):
        np.testing.assert_array_equal(f(np.zeros(n, np.float32)), np.ones(n, np.float32))
    s = f.stats()
    assert s["variant_limit_hits"] == 1
    assert s["compiles"] == 3  # two exact variants, then the most general one
    assert any("variant bound reached" in r for r in s["recompile_reasons"])


def test_outputs_take_the_call_shape_with_strided_inputs():
    @kiln.jit(dynamic=True, cache=False)
    def f(x):
        return x.T @ x

    rng = rng_for("strided")
    for n in [5, 8, 13]:
        base = rng.normal(size=(2 * n, 7)).astype(np.float32)
        x = base[::2]  # strided rows
        assert_close(f(x), f64(x).T @ f64(x), np.float32, k=n)
    assert f.stats()["compiles"] == 1


@pytest.mark.llvm
def test_comparisons_of_symbolic_dims_are_sound():
    @kiln.jit(dynamic=True, cache=False)
    def f(a, b):
        # Equal extents share a symbol (the guard keeps them equal); a symbol is never 1.
        same = a.shape == b.shape
        one = a.shape[0] == 1
        return (a + b if same else a - b) * (0.0 if one else 1.0)

    for n in [4, 5, 9]:
        x = np.ones((n, 3), np.float32)
        np.testing.assert_array_equal(f(x, x), np.full((n, 3), 2, np.float32))
    assert f.stats()["compiles"] == 1, f.stats()["recompile_reasons"]


@pytest.mark.llvm
def test_comparing_a_symbolic_dim_with_an_extent_keeps_it_exact():
    @kiln.jit(cache=False)
    def f(x):
        return x * 2 if x.shape[-1] == 64 else x

    for n in [64, 32, 64, 48]:
        x = np.ones((2, n), np.float32)
        np.testing.assert_array_equal(f(x), x * (2 if n == 64 else 1))
    reasons = f.stats()["recompile_reasons"]
    assert any("arg 0 dim 1: kept exact" in r for r in reasons), reasons
