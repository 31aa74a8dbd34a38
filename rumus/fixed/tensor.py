"""Fixed-point tensors: explicit constructors and the only two float <-> fixed conversions.

A fixed_i16(s) tensor holds raw int16 q meaning q / 2**s. Nothing converts implicitly: `tensor`
takes raw integers, `quantize` / `dequantize` are the explicit (and only) float boundary, used by
`from_float` and by accuracy reports, never by the fixed-point ops themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import AutogradError, DType, DTypeError, RumusError, ShapeError, fixed_i16

from .. import _runtime
from .._storage import Storage
from ..tensor import Tensor, make_tensor

I16_MIN, I16_MAX = -32768, 32767
# The float -> fixed rounding of `quantize` / `from_float` (numpy's rint). The fixed-point ops
# themselves round with ROUNDING (nearest, ties away from zero), as SPEC E says.
FLOAT_ROUNDING = "nearest_ties_to_even"


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ShapeError(f"a fixed-point shape is a tuple of non-negative integers, got {shape!r}")
    return tuple(int(d) for d in dims)


def raw_int16(values: Any, what: str = "values") -> np.ndarray:
    """values (nested ints, an integer numpy array) as an int16 array; refuses floats and out-of-range."""
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    if arr.size == 0:
        return np.zeros(arr.shape, np.int16)
    if arr.dtype == object:  # Python ints beyond int64
        try:
            arr = np.array(values, dtype=np.int64)
        except (OverflowError, TypeError, ValueError):
            raise DTypeError(f"fixed-point {what} must be integers in {I16_MIN}..{I16_MAX}") from None
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"fixed-point {what} must be raw int16 integers, got {arr.dtype} values; convert "
                         f"floats explicitly with rumus.fixed.quantize(values, scale_log2)")
    if arr.dtype != np.int16:
        bad = np.flatnonzero((arr < I16_MIN) | (arr > I16_MAX))
        if bad.size:
            raise DTypeError(f"fixed-point {what} must lie in {I16_MIN}..{I16_MAX}; flat index {int(bad[0])} "
                             f"holds {int(arr.reshape(-1)[bad[0]])}")
    return arr.astype(np.int16)


def from_raw(raw: np.ndarray, dtype: DType) -> Tensor:
    """A new CPU tensor whose storage is a copy of `raw` (already dtype.numpy values), shape kept.

    Like rumus._creation.from_storage, except that a 0-d array stays 0-d (from_storage goes through
    np.ascontiguousarray, which turns () into (1,))."""
    backend = _runtime.backend("cpu")
    device = backend.devices()[0]
    host = np.array(raw, dtype=dtype.numpy, order="C", copy=True)
    buf = backend.from_numpy(device, host.reshape(-1), dtype)
    return make_tensor(Storage(buf, device, dtype, backend, host.size), tuple(host.shape))


def tensor(values: Any, shape: int | Sequence[int], scale_log2: int, *, requires_grad: bool = False) -> Tensor:
    """A CPU fixed_i16(scale_log2) tensor of `shape` holding the raw int16 `values` (row-major)."""
    dtype = fixed_i16(scale_log2)
    if requires_grad:
        raise AutogradError("requires_grad=True is refused: fixed-point tensors are inference-only")
    dims = _shape(shape)
    raw = raw_int16(values)
    if raw.size != int(np.prod(dims, dtype=np.int64)):
        raise ShapeError(f"rumus.fixed.tensor: {raw.size} values do not fill shape {dims}")
    return from_raw(raw.reshape(dims), dtype)


def require_fixed(t: Any, what: str, scale_log2: int | None = None) -> DType:
    """t's dtype, after checking t is a fixed-point tensor (of scale_log2 when given)."""
    if not isinstance(t, Tensor):
        raise DTypeError(f"{what} must be a fixed-point rumus Tensor, got {type(t).__name__}")
    if not t.dtype.is_fixed:
        raise DTypeError(f"{what} must be a fixed-point tensor (fixed_i16(s)), got {t.dtype}; build it with "
                         f"rumus.fixed.tensor or rumus.fixed.quantize")
    if scale_log2 is not None and t.dtype.param != scale_log2:
        raise DTypeError(f"{what} has fixed-point scale_log2 {t.dtype.param}, expected {scale_log2}: every "
                         f"tensor of one fixed-point model shares one scale")
    return t.dtype


def scale_log2_of(t: Tensor) -> int:
    dtype = require_fixed(t, "the tensor")
    assert dtype.param is not None  # fixed dtypes always carry their scale
    return int(dtype.param)


def quantize_array(values: Any, scale_log2: int) -> tuple[np.ndarray, int]:
    """(raw int16 array, how many values saturated): round(v * 2**s) ties to even, clipped to int16."""
    fixed_i16(scale_log2)
    arr = values.numpy() if isinstance(values, Tensor) else np.asarray(values)
    if arr.dtype.kind not in "fiu":
        raise RumusError(f"quantize expects numbers, got {arr.dtype}")
    scaled = np.rint(arr.astype(np.float64) * float(1 << scale_log2))
    if not np.all(np.isfinite(scaled)):
        raise RumusError("quantize: values must be finite (NaN or inf have no fixed-point value)")
    saturated = int(np.count_nonzero((scaled < I16_MIN) | (scaled > I16_MAX)))
    return np.clip(scaled, I16_MIN, I16_MAX).astype(np.int16), saturated


def quantize(values: Any, scale_log2: int) -> Tensor:
    """Float values (array-like or float Tensor) -> fixed_i16(scale_log2) tensor; see FLOAT_ROUNDING."""
    raw, _ = quantize_array(values, scale_log2)
    return from_raw(raw, fixed_i16(scale_log2))


def dequantize(t: Tensor) -> np.ndarray:
    """The float64 values q / 2**s of a fixed-point tensor (host array; exact: int16 fits a float64)."""
    s = scale_log2_of(t)
    return t.fixed_i16_data().astype(np.float64) / float(1 << s)
