"""matmul (functions and @, batched, broadcast batch, 1-d operands, size 0 and 1) and conv2d
(stride, padding, dilation, groups, bias) against numpy in float64."""

import numpy as np
import pytest

import kiln
from conftest import (FLOAT_DTYPES, INT_DTYPES, assert_close, dtype_id, f64, np_conv2d,
                      np_gelu, random_array, rng_for)

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((17, 33), (33, 9)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
    ((5, 1, 3, 4), (2, 4, 6)), ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)), ((0, 4), (4, 3)), ((3, 0), (0, 2)),
]


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES[1:], ids=dtype_id)
def test_matmul(dtype):
    rng = rng_for("matmul", dtype)
    f = kiln.jit(lambda a, b: (a @ b, kiln.matmul(a, b)))
    for sa, sb in MATMUL_SHAPES:
        a = random_array(rng, sa, dtype, -2, 2)
        b = random_array(rng, sb, dtype, -2, 2)
        y1, y2 = f(a, b)
        want = np.matmul(f64(a), f64(b))
        assert y1.shape == want.shape and y2.shape == want.shape
        assert y1.dtype == np.dtype(dtype)
        k = sa[-1]
        assert_close(y1, want, dtype, k=k)
        assert_close(y2, want, dtype, k=k)


LINEAR_SHAPES = [(1, 1, 1), (5, 7, 3), (17, 33, 9), (64, 48, 80), (2, 129, 31)]  # (rows, in, out)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "silu"])
def test_float32_linear_layers_are_one_x86_kernel_in_every_build(act):
    # A float32 matmul with its bias, activation and residual is the x86 GEMM backend's alone:
    # one kernel, no fallback, in a build without LLVM too (where nothing else compiles).
    fn = {"none": lambda v: v, "relu": kiln.relu, "gelu": kiln.gelu, "silu": kiln.silu}[act]
    ref = {"none": lambda v: v, "relu": lambda v: np.maximum(v, 0), "gelu": np_gelu,
           "silu": lambda v: v / (1 + np.exp(-v))}[act]
    rng = rng_for("linear", act)
    f = kiln.jit(lambda x, w, b: fn(x @ w + b), dynamic=False)
    g = kiln.jit(lambda x, w, r: x @ w.T + r, dynamic=False)  # transposed weight, residual
    for m, k, n in LINEAR_SHAPES:
        x = random_array(rng, (m, k), np.float32)
        w = random_array(rng, (k, n), np.float32)
        b = random_array(rng, (n,), np.float32)
        r = random_array(rng, (m, n), np.float32)
        assert_close(f(x, w, b), ref(f64(x) @ f64(w) + f64(b)), np.float32, k=k)
        wt = np.ascontiguousarray(w.T)
        assert_close(g(x, wt, r), f64(x) @ f64(w) + f64(r), np.float32, k=k)
    for h in (f, g):
        s = h.stats()
        assert s["backend_kernels"] == {"x86": len(LINEAR_SHAPES)}, s
        assert s["fallbacks"] == 0 and not s["fallback_reasons"], s


def test_a_transposed_weight_two_matmuls_share_is_read_in_place_by_both():
    # No kernel copies w.T for the two matmuls (and none needs LLVM): two x86 kernels.
    rng = rng_for("shared-weight")
    f = kiln.jit(lambda x, z, w: (x @ w.T, z @ w.T))
    x, z, w = (random_array(rng, s, np.float32) for s in ((9, 20), (4, 20), (13, 20)))
    y1, y2 = f(x, z, w)
    assert_close(y1, f64(x) @ f64(w).T, np.float32, k=20)
    assert_close(y2, f64(z) @ f64(w).T, np.float32, k=20)
    assert f.stats()["backend_kernels"] == {"x86": 2}


@pytest.mark.parametrize("mask_shape", [(6, 9), (2, 1, 6, 9), (3, 6, 9), (2, 3, 6, 9)])
def test_attention_scores_with_a_broadcast_mask_are_one_x86_kernel(mask_shape):
    # q @ k^T * scale + mask: the mask, broadcast over batch and heads, is the fused residual.
    rng = rng_for("mask", mask_shape)
    q, k = random_array(rng, (2, 3, 6, 8), np.float32), random_array(rng, (2, 3, 9, 8), np.float32)
    mask = random_array(rng, mask_shape, np.float32)
    f = kiln.jit(lambda q, k, m: (q @ kiln.transpose(k, (0, 1, 3, 2))) * 0.125 + m)
    assert_close(f(q, k, mask), f64(q) @ f64(k).transpose(0, 1, 3, 2) * 0.125 + f64(mask), np.float32, k=8)
    assert f.stats()["backend_kernels"] == {"x86": 1} and f.stats()["fallbacks"] == 0


def test_a_gemv_written_with_a_vector_is_one_x86_kernel():
    # W @ v and v @ W: the traced reshape of the matmul's [M, 1] / [1, N] to a vector is not a
    # copy kernel: the GEMV stores straight into the output.
    rng = rng_for("gemv-vector")
    w, v, u = random_array(rng, (40, 70), np.float32), random_array(rng, (70,), np.float32), random_array(rng, (40,), np.float32)
    f, g = kiln.jit(lambda w, v: w @ v), kiln.jit(lambda u, w: u @ w)
    assert_close(f(w, v), f64(w) @ f64(v), np.float32, k=70)
    assert_close(g(u, w), f64(u) @ f64(w), np.float32, k=40)
    assert f.stats()["backend_kernels"] == {"x86": 1} and g.stats()["backend_kernels"] == {"x86": 1}


@pytest.mark.parametrize("form", ["W@v+b", "relu(W@v+b)+r", "gelu(u@W+b)", "silu(u@W)*2", "W3@v-1", "W@v+b (numpy b)"])
def test_a_gemv_written_with_a_vector_takes_its_epilogue(form):
    # The vector result's reshape sinks below the bias and activation, and W @ v runs as
    # v^T @ W^T (its bias along the GEMM's columns): one x86 kernel, in a build without LLVM too.
    rng = rng_for("gemv-epilogue", form)
    w3 = random_array(rng, (3, 40, 70), np.float32)
    w, v, u = w3[1], random_array(rng, (70,), np.float32), random_array(rng, (40,), np.float32)
    b, r, bn = random_array(rng, (40,), np.float32), random_array(rng, (40,), np.float32), random_array(rng, (70,), np.float32)
    fn, args, want = {
        "W@v+b": (lambda w, v, b: w @ v + b, (w, v, b), f64(w) @ f64(v) + f64(b)),
        "relu(W@v+b)+r": (lambda w, v, b, r: kiln.relu(w @ v + b) + r, (w, v, b, r),
                          np.maximum(f64(w) @ f64(v) + f64(b), 0) + f64(r)),
        "gelu(u@W+b)": (lambda u, w, b: kiln.gelu(u @ w + b), (u, w, bn), np_gelu(f64(u) @ f64(w) + f64(bn))),
        "silu(u@W)*2": (lambda u, w: kiln.silu(u @ w) * 2.0, (u, w),
                        2 * (f64(u) @ f64(w)) / (1 + np.exp(-(f64(u) @ f64(w))))),
        "W3@v-1": (lambda w, v: w @ v - 1.0, (w3, v), f64(w3) @ f64(v) - 1),
        "W@v+b (numpy b)": (lambda w, v: w @ v + b, (w, v), f64(w) @ f64(v) + f64(b)),
    }[form]
    expect_split = form == "silu(u@W)*2"  # a scale after silu does not fold in: split, counted
    if expect_split and kiln.device_info()["llvm"] is None:
        pytest.skip("the split-off epilogue is an elementwise kernel, which only LLVM builds compile")
    f = kiln.jit(fn)
    got = f(*args)
    assert got.shape == want.shape
    assert_close(got, want, np.float32, k=70)
    s = f.stats()
    assert s["backend_kernels"] == ({"x86": 1, "llvm": 1} if expect_split else {"x86": 1}), s
    assert s["fallbacks"] == (1 if expect_split else 0), s


@pytest.mark.parametrize("form", ["swiglu", "geglu", "gate"])
def test_a_gated_linear_unit_is_two_x86_kernels(form):
    # silu(x @ w1) * (x @ w3): one product stored, the other multiplying it in its epilogue; no
    # elementwise kernel (so a build without LLVM runs it too).
    rng = rng_for("glu", form)
    x, w1, w3 = (random_array(rng, s, np.float32) for s in ((6, 40), (40, 56), (40, 56)))
    g, u = f64(x) @ f64(w1), f64(x) @ f64(w3)
    fn, want = {
        "swiglu": (lambda x, w1, w3: kiln.silu(x @ w1) * (x @ w3), g / (1 + np.exp(-g)) * u),
        "geglu": (lambda x, w1, w3: kiln.gelu(x @ w1) * (x @ w3), np_gelu(g) * u),
        "gate": (lambda x, w1, w3: (x @ w1) * (x @ w3), g * u),
    }[form]
    f = kiln.jit(fn)
    assert_close(f(x, w1, w3), want, np.float32, k=80)
    s = f.stats()
    assert s["backend_kernels"] == {"x86": 2} and s["fallbacks"] == 0, s


@pytest.mark.parametrize("form", ["x@w-b", "relu(x@w+1.5)", "x@w*2-b+0.25", "x@w+b+0.5", "relu(x@w+b)*2",
                                  "(x@w+b)/2", "b-x@w", "relu(0.5-x@w*2+b)", "-(x@w)+b"])
def test_subtracted_and_scalar_bias_terms_and_a_later_scale_fuse(form):
    fn, ref = {
        "x@w-b": (lambda x, w, b: x @ w - b, lambda y, b: y - b),
        "relu(x@w+1.5)": (lambda x, w, b: kiln.relu(x @ w + 1.5), lambda y, b: np.maximum(y + 1.5, 0)),
        "x@w*2-b+0.25": (lambda x, w, b: x @ w * 2.0 - b + 0.25, lambda y, b: 2 * y - b + 0.25),
        "x@w+b+0.5": (lambda x, w, b: x @ w + b + 0.5, lambda y, b: y + b + 0.5),
        "relu(x@w+b)*2": (lambda x, w, b: kiln.relu(x @ w + b) * 2.0, lambda y, b: 2 * np.maximum(y + b, 0)),
        "(x@w+b)/2": (lambda x, w, b: (x @ w + b) / 2.0, lambda y, b: (y + b) / 2),
        "b-x@w": (lambda x, w, b: b - x @ w, lambda y, b: b - y),
        "relu(0.5-x@w*2+b)": (lambda x, w, b: kiln.relu(0.5 - x @ w * 2.0 + b), lambda y, b: np.maximum(0.5 - 2 * y + b, 0)),
        "-(x@w)+b": (lambda x, w, b: -(x @ w) + b, lambda y, b: b - y),
    }[form]
    rng = rng_for("bias-terms", form)
    x, w, b = random_array(rng, (9, 30), np.float32), random_array(rng, (30, 21), np.float32), random_array(rng, (21,), np.float32)
    f = kiln.jit(fn)
    assert_close(f(x, w, b), ref(f64(x) @ f64(w), f64(b)), np.float32, k=30)
    assert f.stats()["backend_kernels"] == {"x86": 1} and f.stats()["fallbacks"] == 0


def test_matmul_shape_mismatch():
    f = kiln.jit(lambda a, b: a @ b)
    with pytest.raises(kiln.ShapeError):
        f(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))


@pytest.mark.llvm
def test_matmul_with_captured_weights_on_either_side():
    rng = rng_for("captured")
    w = rng.normal(size=(8, 4)).astype(np.float32)
    v = rng.normal(size=(3, 5)).astype(np.float32)
    f = kiln.jit(lambda x: (x @ w, v @ np.ones((5, 2), np.float32)))  # 2nd: constants only
    x = rng.normal(size=(5, 8)).astype(np.float32)
    y1, y2 = f(x)
    assert_close(y1, f64(x) @ f64(w), np.float32, k=8)
    assert_close(y2, f64(v) @ np.ones((5, 2)), np.float32, k=5)

    g = kiln.jit(lambda x: v @ x)  # numpy array on the left defers to kiln.Tensor.__rmatmul__
    x2 = rng.normal(size=(5, 2)).astype(np.float32)
    assert_close(g(x2), f64(v) @ f64(x2), np.float32, k=5)


CONV_CASES = [
    dict(),
    dict(stride=2),
    dict(padding=1),
    dict(padding=(2, 1), stride=(1, 2)),
    dict(dilation=2, padding=2),
    dict(groups=2),
    dict(groups=4, padding=1),  # depthwise
]


@pytest.mark.llvm
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=dtype_id)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d(case, dtype):
    params = CONV_CASES[case]
    groups = params.get("groups", 1)
    rng = rng_for("conv", case, dtype)
    x = random_array(rng, (2, 4, 9, 8), dtype, -1, 1)
    w = random_array(rng, (8, 4 // groups, 3, 3), dtype, -1, 1)
    b = random_array(rng, (8,), dtype, -1, 1)
    y = kiln.jit(lambda x, w: kiln.conv2d(x, w, **params))(x, w)
    yb = kiln.jit(lambda x, w, b: kiln.conv2d(x, w, b, **params))(x, w, b)
    want = np_conv2d(f64(x), f64(w), **params)
    assert y.shape == want.shape and y.dtype == np.dtype(dtype)
    k = (4 // groups) * 9
    assert_close(y, want, dtype, k=k)
    assert_close(yb, np_conv2d(f64(x), f64(w), f64(b), **params), dtype, k=k)
    # Both at once: the convolution, an output that the bias add also reads, is kept exact for it
    # (a float32 temp) and copied into its output.
    y2, yb2 = kiln.jit(lambda x, w, b: (kiln.conv2d(x, w, **params), kiln.conv2d(x, w, b, **params)))(x, w, b)
    assert_close(y2, want, dtype, k=k)
    assert_close(yb2, np_conv2d(f64(x), f64(w), f64(b), **params), dtype, k=k)


def test_conv2d_bad_channels():
    f = kiln.jit(lambda x, w: kiln.conv2d(x, w))
    with pytest.raises(kiln.ShapeError):
        f(np.ones((1, 3, 5, 5), np.float32), np.ones((2, 4, 3, 3), np.float32))


@pytest.mark.parametrize("m,k,n", [(0, 5, 7), (3, 0, 7), (3, 5, 0), (0, 0, 0), (1, 0, 1), (1, 1, 1), (2, 3, 1)])
def test_gates_gemv_epilogues_and_left_terms_at_sizes_0_and_1(m, k, n):
    # The fused forms with an empty or single-element M, K or N: one x86 kernel each (two for the
    # gate), no fallback, numpy's result (zeros where K is 0).
    rng = rng_for("fused-small", m, k, n)
    x, w1, w3, b = (random_array(rng, s, np.float32) for s in ((m, k), (k, n), (k, n), (n,)))
    W, v, bm, u = (random_array(rng, s, np.float32) for s in ((m, k), (k,), (m,), (k,)))
    g, h = f64(x) @ f64(w1), f64(x) @ f64(w3)
    cases = [
        (lambda x, w1, w3: kiln.silu(x @ w1) * (x @ w3), (x, w1, w3), g / (1 + np.exp(-g)) * h, 2),
        (lambda x, w1, b: b - x @ w1, (x, w1, b), f64(b) - g, 1),
        (lambda W, v, b: kiln.relu(W @ v + b), (W, v, bm), np.maximum(f64(W) @ f64(v) + f64(bm), 0), 1),
        (lambda u, w, b: kiln.gelu(u @ w + b), (u, w1, b), np_gelu(f64(u) @ f64(w1) + f64(b)), 1),
    ]
    for fn, args, want, kernels in cases:
        f = kiln.jit(fn)
        assert_close(f(*args), want, np.float32, k=max(k, 1) * 2)
        s = f.stats()
        assert s["backend_kernels"] == {"x86": kernels} and s["fallbacks"] == 0, s


@pytest.mark.parametrize("form", ["x@w*g", "relu(x@w*g+b)", "r+g*(x@w+b)", "g*relu(x@w+b)", "relu(x@w+b)+c"])
def test_a_column_scale_or_a_broadcast_row_fuses(form):
    # LayerScale (r + g * (x @ w + b)), a per-column scale before the activation, and a vector
    # along N multiplying or added last: one x86 kernel, in a build without LLVM too.
    rng = rng_for("col-scale", form)
    x, w, r = random_array(rng, (7, 30), np.float32), random_array(rng, (30, 19), np.float32), random_array(rng, (7, 19), np.float32)
    b, g = random_array(rng, (19,), np.float32), random_array(rng, (19,), np.float32)
    y = f64(x) @ f64(w)
    fn, want = {
        "x@w*g": (lambda x, w, b, g, r: x @ w * g, y * f64(g)),
        "relu(x@w*g+b)": (lambda x, w, b, g, r: kiln.relu(x @ w * g + b), np.maximum(y * f64(g) + f64(b), 0)),
        "r+g*(x@w+b)": (lambda x, w, b, g, r: r + g * (x @ w + b), f64(r) + f64(g) * (y + f64(b))),
        "g*relu(x@w+b)": (lambda x, w, b, g, r: g * kiln.relu(x @ w + b), f64(g) * np.maximum(y + f64(b), 0)),
        "relu(x@w+b)+c": (lambda x, w, b, g, r: kiln.relu(x @ w + b) + g, np.maximum(y + f64(b), 0) + f64(g)),
    }[form]
    f = kiln.jit(fn)
    assert_close(f(x, w, b, g, r), want, np.float32, k=30)
    s = f.stats()
    assert s["backend_kernels"] == {"x86": 1} and s["fallbacks"] == 0, s
