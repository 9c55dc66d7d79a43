"""Small real programs against numpy in float64, at several batch sizes (one JitFunction each, so
new batch sizes also exercise dynamic shapes): MLP with GELU, causal self-attention, layer_norm and
rms_norm blocks, conv2d + batchnorm (constants) + relu, a residual block."""

import math

import numpy as np
import pytest

import kiln
from conftest import assert_close, f64, np_conv2d, np_gelu, np_layer_norm, np_rms_norm, np_softmax, rng_for

# Every test here compiles kernels only the LLVM backend builds (see conftest.py).
pytestmark = pytest.mark.llvm

BATCHES = [1, 3, 8, 5]


def test_mlp_gelu():
    rng = rng_for("mlp")
    w1 = rng.normal(0, 0.2, (32, 64)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (64,)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (64, 32)).astype(np.float32)

    @kiln.jit
    def mlp(x, w1, b1, w2):
        h = kiln.gelu(x @ w1 + b1)
        return kiln.layer_norm(x + h @ w2, eps=1e-5)

    for batch in BATCHES:
        x = rng.normal(size=(batch, 32)).astype(np.float32)
        h = np_gelu(f64(x) @ f64(w1) + f64(b1))
        want = np_layer_norm(f64(x) + h @ f64(w2), eps=1e-5)
        assert_close(mlp(x, w1, b1, w2), want, np.float32, k=64 * 32)
    assert mlp.stats()["calls"] == len(BATCHES)


def np_attention(x, wq, wk, wv, wo, heads):
    b, t, d = x.shape
    hd = d // heads
    q = (x @ wq).reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
    k = (x @ wk).reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
    v = (x @ wv).reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    mask = np.tril(np.ones((t, t), bool))
    s = np.where(mask, s, -np.inf)
    o = np_softmax(s, -1) @ v
    return o.transpose(0, 2, 1, 3).reshape(b, t, d) @ wo


def test_causal_self_attention():
    rng = rng_for("attention")
    d, heads, t = 32, 4, 16
    ws = [rng.normal(0, d**-0.5, (d, d)).astype(np.float32) for _ in range(4)]
    mask = np.tril(np.ones((t, t), bool))

    @kiln.jit
    def attention(x, wq, wk, wv, wo):
        b, t_, _ = x.shape
        hd = d // heads
        q = (x @ wq).reshape(b, t_, heads, hd).transpose(0, 2, 1, 3)
        k = (x @ wk).reshape(b, t_, heads, hd).transpose(0, 2, 1, 3)
        v = (x @ wv).reshape(b, t_, heads, hd).transpose(0, 2, 1, 3)
        s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))
        s = kiln.where(mask, s, -1e30)  # the mask is a captured numpy constant
        o = kiln.softmax(s, axis=-1) @ v
        return o.transpose(0, 2, 1, 3).reshape(b, t_, d) @ wo

    for batch in [1, 2, 4]:
        x = rng.normal(size=(batch, t, d)).astype(np.float32)
        want = np_attention(f64(x), *[f64(w) for w in ws], heads)
        assert_close(attention(x, *ws), want, np.float32, k=d * t)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_norm_blocks(dtype):
    rng = rng_for("norms", dtype)
    g = rng.uniform(0.5, 1.5, 48).astype(dtype)
    beta = rng.normal(0, 0.1, 48).astype(dtype)

    @kiln.jit
    def block(x):
        return kiln.layer_norm(x, g, beta, eps=1e-5) + kiln.rms_norm(x, g, eps=1e-6)

    for batch in BATCHES:
        x = rng.normal(size=(batch, 48)).astype(dtype)
        want = np_layer_norm(f64(x), f64(g), f64(beta), eps=1e-5) + np_rms_norm(f64(x), f64(g), eps=1e-6)
        assert_close(block(x), want, dtype, k=48)


def test_conv_batchnorm_relu():
    rng = rng_for("conv-bn")
    w = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    mean = rng.normal(0, 0.1, 8).astype(np.float32)
    var = rng.uniform(0.5, 2, 8).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    beta = rng.normal(0, 0.1, 8).astype(np.float32)

    @kiln.jit
    def conv_bn_relu(x):
        y = kiln.conv2d(x, w, padding=1)
        y = (y - mean[:, None, None]) * kiln.rsqrt(var[:, None, None] + 1e-5)
        return kiln.relu(y * gamma[:, None, None] + beta[:, None, None])

    for batch in [1, 2, 4]:
        x = rng.normal(size=(batch, 3, 10, 10)).astype(np.float32)
        y = np_conv2d(f64(x), f64(w), padding=1)
        y = (y - f64(mean)[:, None, None]) / np.sqrt(f64(var)[:, None, None] + 1e-5)
        want = np.maximum(y * f64(gamma)[:, None, None] + f64(beta)[:, None, None], 0)
        assert_close(conv_bn_relu(x), want, np.float32, k=27)


def test_residual_block():
    rng = rng_for("residual")
    w1 = rng.normal(0, 0.2, (24, 24)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (24, 24)).astype(np.float32)

    @kiln.jit
    def residual(x):
        h = kiln.relu(kiln.rms_norm(x) @ w1)
        h = kiln.silu(h @ w2)
        return x + 0.5 * h

    for batch in BATCHES:
        x = rng.normal(size=(batch, 24)).astype(np.float32)
        h = np.maximum(np_rms_norm(f64(x)) @ f64(w1), 0) @ f64(w2)
        want = f64(x) + 0.5 * (h / (1 + np.exp(-h)))
        assert_close(residual(x), want, np.float32, k=24 * 24)


def test_api_md_example():
    rng = rng_for("api-example")

    @kiln.jit
    def block(x, w1, b1, w2):
        h = kiln.gelu(x @ w1 + b1)
        return kiln.layer_norm(x + h @ w2, eps=1e-5)

    x = rng.normal(size=(4, 16)).astype(np.float32)
    w1 = rng.normal(0, 0.25, (16, 32)).astype(np.float32)
    b1 = np.zeros(32, np.float32)
    w2 = rng.normal(0, 0.25, (32, 16)).astype(np.float32)
    y = block(x, w1, b1, w2)
    assert isinstance(y, np.ndarray) and y.shape == (4, 16) and y.dtype == np.float32
