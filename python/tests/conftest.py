"""Shared helpers of kiln's Python tests: a private cache directory, seeded inputs, the tolerances
of CONVENTIONS.md, and numpy references computed in float64."""

import math
import os
import sys
import tempfile

# `python -m pytest` from python/ puts python/ on sys.path, where the kiln sources shadow the
# installed package (which has the compiled extension): test the installed one.
_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _SRC]

# kiln reads the environment once, at first use: point it at a private cache before importing it.
# Always a fresh one: the tests count compiles and disk hits, and with a warm KILN_CACHE_DIR of the
# user's two of them failed (and the suite's kernels went into that cache).
os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-pytest-")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

# Whether this kiln has the LLVM backend. Without it (-DKILN_WITH_LLVM=OFF) only what the x86 GEMM
# backend takes compiles, and the tests marked `llvm` (they compile other kernels) are skipped with
# that reason; every other test runs and must pass there too.
HAS_LLVM = kiln.device_info()["llvm"] is not None
NEEDS_LLVM_REASON = "needs the LLVM backend: kiln was built without LLVM (-DKILN_WITH_LLVM=OFF)"


def pytest_configure(config):
    config.addinivalue_line("markers", "llvm: compiles kernels only the LLVM backend builds")


def pytest_report_header(config):
    return f"kiln {kiln.__file__}: " + (f"LLVM {kiln.device_info()['llvm']}" if HAS_LLVM else
                                        "built without LLVM: the tests marked llvm are skipped")


def pytest_collection_modifyitems(config, items):
    if HAS_LLVM:
        return
    skip = pytest.mark.skip(reason=NEEDS_LLVM_REASON)
    for item in items:
        if item.get_closest_marker("llvm"):
            item.add_marker(skip)

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None

FLOAT_DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)] + ([BF16] if BF16 else [])
INT_DTYPES = [np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.int64)]
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + [np.dtype(np.bool_)]

# (rtol, atol) per dtype, from CONVENTIONS.md.
TOLERANCES = {
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-12, 1e-12),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


def is_narrow(d):
    """float16 or bfloat16."""
    d = np.dtype(d)
    return d == np.float16 or d == BF16


# Failures of the compiled code that these tests found, keyed by test id fragments; such a case
# is an expected failure (counted and printed by pytest as xfail), so the suite stays green while
# the bug is open and an XPASS says when it is fixed.
KNOWN_BACKEND_BUGS = {
    # None open. (The last, "narrow-temps": a float16/bfloat16 output that another kernel read was
    # read back rounded; fixed in src/jit/compile.cpp, tests/BUGS_FOUND.md.)
}


def xfail_if_known(request, *keys):
    for key in keys:
        if key in KNOWN_BACKEND_BUGS:
            request.applymarker(pytest.mark.xfail(reason=KNOWN_BACKEND_BUGS[key], strict=False))


def is_float(d):
    d = np.dtype(d)
    return d.kind == "f" or d == BF16


def dtype_id(d):
    return np.dtype(d).name


def rng_for(*key):
    """A generator seeded from the test's parameters, so every case is reproducible."""
    h = 0
    for k in key:
        for ch in str(k):
            h = (h * 131 + ord(ch)) % (2**32)
    return np.random.default_rng(h)


def random_array(rng, shape, dtype, low=-2.0, high=2.0):
    """Random values of `dtype` in [low, high) (integers: a small range inside it)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        span = 8 if dtype.itemsize == 1 else 50
        lo, hi = max(-span, math.ceil(low)), min(span, math.floor(high))
        return rng.integers(lo, max(hi, lo + 1), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def f64(a):
    """Exact float64 copy of an array of any kiln dtype (bf16/f16 widen exactly)."""
    return np.asarray(a).astype(np.float32).astype(np.float64) if np.asarray(a).dtype in (BF16, np.float16) \
        else np.asarray(a).astype(np.float64)


def assert_close(actual, expected, dtype=None, k=1, extra_rtol=0.0):
    """Compares kiln's result to a float64 reference with the dtype's tolerance; `k` scales the
    tolerance for sums of k terms (matmul, reductions). float16/bfloat16 are computed in float32
    and rounded once, when stored, so the same tolerances hold for composites."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    dtype = np.dtype(dtype if dtype is not None else actual.dtype)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected.astype(dtype))
        return
    rtol, atol = TOLERANCES[dtype.name]
    ks = max(1.0, math.sqrt(k)) if k > 1 else 1.0
    np.testing.assert_allclose(f64(actual), f64(expected), rtol=rtol * ks + extra_rtol,
                               atol=atol * ks)


def ref_round(x, dtype):
    """A float64 reference rounded to `dtype`, as kiln returns it."""
    return np.asarray(x, dtype=np.float64).astype(dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_erf(x):
    return _erf(np.asarray(x, dtype=np.float64))


def np_gelu(x, approximate=False):
    x = np.asarray(x, dtype=np.float64)
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + np_erf(x / math.sqrt(2.0)))


def np_softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_layer_norm(x, w=None, b=None, axis=-1, eps=1e-5):
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axis, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def np_rms_norm(x, w=None, axis=-1, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    y = x / np.sqrt((x * x).mean(axis=axis, keepdims=True) + eps)
    return y if w is None else y * w


def np_conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if bias is not None:
        out += np.asarray(bias, dtype=np.float64)[None, :, None, None]
    return out


@pytest.fixture
def rng(request):
    return rng_for(request.node.nodeid)


needs_bf16 = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is not installed")
