"""kiln: a JIT compiler for tensor programs whose shapes change from call to call.

    @kiln.jit
    def block(x, w1, b1, w2):
        h = kiln.gelu(x @ w1 + b1)
        return kiln.layer_norm(x + h @ w2, eps=1e-5)

See API.md for the public names."""

import numpy as _np

from . import _kiln
from ._dtypes import bfloat16, bool_, float16, float32, float64, int8, int32, int64
from ._jit import JitFunction, jit
from ._kiln import CompileError, DeviceError, DTypeError, Error, Inspection, KernelInfo, ShapeError
from ._ops import (
    abs,
    astype,
    broadcast_to,
    clip,
    concatenate,
    conv2d,
    erf,
    exp,
    gelu,
    layer_norm,
    log,
    log_softmax,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    pow,
    relu,
    reshape,
    rms_norm,
    rsqrt,
    sigmoid,
    silu,
    softmax,
    sqrt,
    square,
    sum,
    tanh,
    transpose,
    where,
)
from ._tensor import SymbolicDim, Tensor

__version__ = "0.1.0"


def cache_dir() -> str:
    """The disk cache directory kiln uses (KILN_CACHE_DIR, else XDG_CACHE_HOME/kiln, else ~/.cache/kiln)."""
    return _kiln.cache_dir()


def clear_cache() -> None:
    """Removes every entry of the disk cache."""
    _kiln.clear_cache()


def device_info() -> dict:
    """What kiln detects about this machine: ``cpu_brand``, ``isa`` ("avx512", "avx2" or "sse"),
    ``cpu_features`` (usable, after KILN_ISA), ``cpu_features_hardware``, ``num_cores``,
    ``num_threads`` (kiln's pool), ``l1d_bytes``, ``l2_bytes``, ``l3_bytes``, ``gpus`` (a list of
    dicts with ``name``, ``compute_capability`` and ``memory_bytes``), ``gpu_status`` (why
    ``gpus`` is empty, when it is) and ``report`` (the text of `kiln doctor`)."""
    return _kiln.device_info()


_MAX_THREADS = _kiln.max_threads  # kiln::kMaxThreads


def set_num_threads(n: int) -> None:
    """Sets the size of kiln's intra-op thread pool (1 to 1024 threads)."""
    if not isinstance(n, (int, _np.integer)) or isinstance(n, (bool, _np.bool_)):
        raise TypeError(f"set_num_threads: expected an int, got {n!r}")
    if not 1 <= n <= _MAX_THREADS:
        raise ValueError(f"set_num_threads: expected 1 <= n <= {_MAX_THREADS}, got {n}")
    _kiln.set_num_threads(int(n))


__all__ = [
    "jit", "JitFunction", "Tensor", "SymbolicDim", "Inspection", "KernelInfo",
    "Error", "ShapeError", "DTypeError", "CompileError", "DeviceError",
    "float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "bool_",
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "erf", "abs", "square",
    "pow", "maximum", "minimum", "clip", "where", "matmul", "sum", "mean", "max", "min", "softmax",
    "log_softmax", "layer_norm", "rms_norm", "conv2d", "reshape", "transpose", "broadcast_to",
    "concatenate", "astype", "cache_dir", "clear_cache", "device_info", "set_num_threads",
]
