"""kiln's dtypes. They are numpy dtypes (bfloat16 is ml_dtypes' when installed), so
``kiln.float32 == np.float32`` and numpy dtypes are accepted wherever a kiln dtype is."""

import numpy as np

from . import _kiln

try:
    import ml_dtypes as _ml_dtypes

    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    _BF16 = None


class _BFloat16Placeholder:
    """kiln.bfloat16 when ml_dtypes is not installed: usable in astype(), not as a numpy dtype."""

    name = "bfloat16"
    itemsize = 2
    kind = "f"

    def __repr__(self):
        return "kiln.bfloat16"

    def __eq__(self, other):
        return isinstance(other, _BFloat16Placeholder) or other == "bfloat16"

    def __hash__(self):
        return hash("bfloat16")


float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
float16 = np.dtype(np.float16)
bfloat16 = _BF16 if _BF16 is not None else _BFloat16Placeholder()
int8 = np.dtype(np.int8)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

# kiln's C++ names ("bool", not "bool_").
_BY_NAME = {
    "float32": float32,
    "float64": float64,
    "float16": float16,
    "bfloat16": bfloat16,
    "int8": int8,
    "int32": int32,
    "int64": int64,
    "bool": bool_,
}
_ALIASES = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i8": "int8",
    "i32": "int32", "i64": "int64", "bool_": "bool", "boolean": "bool", "half": "float16",
    "float": "float64", "double": "float64", "int": "int64",
}
_SUPPORTED = "float32, float64, float16, bfloat16, int8, int32, int64, bool"


def name_of(dtype) -> str:
    """kiln's name of a dtype given as a kiln/numpy dtype, a numpy type, a Python type or a string."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in _BY_NAME:
            return name
    if isinstance(dtype, _BFloat16Placeholder):
        return "bfloat16"
    if dtype is float:
        return "float64"
    if dtype is int:
        return "int64"
    if dtype is bool:
        return "bool"
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise _kiln.DTypeError(f"unsupported dtype {dtype!r} (kiln takes {_SUPPORTED})") from None
    if _BF16 is not None and d == _BF16:
        return "bfloat16"
    name = "bool" if d == bool_ else d.name
    if name not in _BY_NAME or d.byteorder not in ("=", "|", "<" if np.little_endian else ">"):
        raise _kiln.DTypeError(f"unsupported dtype {d} (kiln takes {_SUPPORTED})")
    return name


def from_name(name: str):
    return _BY_NAME[name]


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a kiln dtype name; bfloat16 needs ml_dtypes."""
    d = _BY_NAME[name]
    if isinstance(d, _BFloat16Placeholder):
        raise _kiln.DTypeError("bfloat16 needs ml_dtypes to be represented in numpy (pip install ml_dtypes)")
    return d


def category(name: str) -> int:
    """0 bool, 1 integer, 2 floating: numpy's ordering for weak (Python scalar) promotion."""
    if name == "bool":
        return 0
    if name.startswith("int"):
        return 1
    return 2
