"""Data movement: strided copy with dtype conversion, and fill. Both may write into strided views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, DTypeError, Kernel, TensorArg, contiguous_strides, fixed_i16

from ._lib import EMPTY, META, SUFFIX, ew_meta, ffi, lib
from .dtypes import HALF, STORAGE

_from_buffer = ffi.from_buffer
_get = META.get


def _copy_loops() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for src in STORAGE:
        for dst in STORAGE:
            idx = lib.rumus_copy_find(f"copy_{SUFFIX[src.name]}_{SUFFIX[dst.name]}".encode())
            if idx < 0:
                raise RuntimeError(f"rumus_cpu: no C copy loop {src} -> {dst}; rebuild the extension")
            out.setdefault(src.name, {})[dst.name] = idx
    return out


_COPY = _copy_loops()
_FILL = {dt.name: lib.rumus_copy_find(f"fill_{SUFFIX[dt.name]}".encode()) for dt in STORAGE}
# float16 -> float16 and bfloat16 -> bfloat16 move raw 16-bit words: every bit pattern (NaN payloads too)
# survives, where a round trip through float would quiet a signalling NaN
for _half in HALF:
    _COPY[_half.name][_half.name] = _COPY["int16"]["int16"]
# fixed_i16(s) tensors copy as their raw int16 values, between identical fixed dtypes only
FIXED = tuple(fixed_i16(s) for s in range(16))
for _dt in FIXED:
    _COPY[_dt.name] = {_dt.name: _COPY["int16"]["int16"]}


def _overlaps(o: TensorArg, x: TensorArg) -> bool:
    """Whether o and x share a buffer at different positions (then x is read before it is overwritten)."""
    return o.buffer is x.buffer and (o.offset != x.offset or o.strides != x.strides or o.dtype != x.dtype)


def copy(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """outputs[0] <- inputs[0] converted to outputs[0].dtype (attrs['dtype'] names the same dtype)."""
    o, x = outputs[0], inputs[0]
    if _overlaps(o, x):
        tmp = np.empty(x.numel, x.buffer.dtype)
        copy([TensorArg(tmp, x.shape, contiguous_strides(x.shape), 0, x.dtype)], [x], attrs)
        x = TensorArg(tmp, x.shape, contiguous_strides(x.shape), 0, x.dtype)
    try:
        loop = _COPY[x.dtype.name][o.dtype.name]
    except KeyError:
        raise DTypeError(f"copy: the CPU backend cannot convert {x.dtype} to {o.dtype}"
                         + ("; fixed-point values change scale through fixed ops, not copy" if
                            x.dtype.is_fixed or o.dtype.is_fixed else "")) from None
    key = (o.shape, o.strides, x.strides)
    meta = _get(key)
    if meta is None:
        meta = ew_meta(key)
    if meta is not EMPTY:
        lib.rumus_copy_run(loop, meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset)


def fill(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """Write attrs['value'] everywhere in outputs[0] (floats to integers truncate, to bool is != 0)."""
    o = outputs[0]
    key = (o.shape, o.strides)
    meta = _get(key)
    if meta is None:
        meta = ew_meta(key)
    if meta is EMPTY:
        return
    value = attrs["value"]
    dt = o.dtype
    if dt.is_floating:
        fv, iv = float(value), 0
    elif dt.is_bool:
        fv, iv = 0.0, 1 if value else 0
    else:
        try:
            iv = int(value)
        except (OverflowError, ValueError):
            raise DTypeError(f"fill: {value!r} has no {dt} value; pass a finite number") from None
        info = np.iinfo(dt.numpy)  # type: ignore[type-var]  # dt is an integer dtype here
        if not info.min <= iv <= info.max:
            raise DTypeError(f"fill: {value!r} is out of range for {dt} ({info.min}..{info.max})")
        fv = 0.0
    lib.rumus_fill_run(_FILL[dt.name], meta, _from_buffer(o.buffer), o.offset, fv, iv)


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("copy", copy, (*STORAGE, *FIXED)),
    ("fill", fill, STORAGE),
]
