"""Reductions (sum, prod, amax, amin), argmax/argmin and softmax/log_softmax; keepdim outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from . import _lib
from ._lib import EMPTY, META, ffi, lib, reduce_meta, softmax_meta
from .dtypes import ALL, FLOAT, HALF, NUMERIC

_from_buffer = ffi.from_buffer
_get = META.get
_run = lib.rumus_reduce_run


def _sum_dims(x: TensorArg, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(attrs["dims"])


def _arg_dims(x: TensorArg, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    return (attrs["dim"],) if x.shape else ()


def reduction(op: str, dtypes: Sequence[DType],
              dims_of: Callable[[TensorArg, Mapping[str, Any]], tuple[int, ...]] = _sum_dims) -> Kernel:
    """sum/prod (integer and bool inputs give int64), amax/amin over attrs['dims']; with _arg_dims,
    argmax/argmin along attrs['dim'] (int64 output, first index on ties)."""
    loops = _lib.loops(lib.rumus_reduce_find, op, dtypes)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        key = ("r", x.shape, x.strides, o.strides, dims_of(x, attrs))
        meta = _get(key)
        if meta is None:
            meta = reduce_meta(key)
        if meta is not EMPTY:
            _run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


def softmax(op: str, dtypes: Sequence[DType]) -> Kernel:
    loops = _lib.loops(lib.rumus_softmax_find, op, dtypes)
    run = lib.rumus_softmax_run

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        key = ("s", x.shape, x.strides, o.strides, attrs["dim"])
        meta = _get(key)
        if meta is None:
            meta = softmax_meta(key)
        if meta is not EMPTY:
            run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


_ALL, _NUMERIC, _FLOAT = (*ALL, *HALF), (*NUMERIC, *HALF), (*FLOAT, *HALF)  # float16/bfloat16: in float32

KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    # sum/prod also take bool (counting a mask), beyond the schema's NUMERIC
    *((op, reduction(op, _ALL), _ALL) for op in ("sum", "prod")),
    *((op, reduction(op, _NUMERIC), _NUMERIC) for op in ("amax", "amin")),
    *((op, reduction(op, _NUMERIC, _arg_dims), _NUMERIC) for op in ("argmax", "argmin")),
    *((op, softmax(op, _FLOAT), _FLOAT) for op in ("softmax", "log_softmax")),
]
