"""Reductions (sum, prod, amax, amin), argmax/argmin and softmax/log_softmax; keepdim outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from . import _lib
from ._lib import EMPTY, META, ffi, lib, reduce_meta, softmax_meta
from .dtypes import ALL, FLOAT, NUMERIC

_from_buffer = ffi.from_buffer
_get = META.get
_run = lib.rumus_reduce_run


def reduction(op: str, dtypes: Sequence[DType]) -> Kernel:
    """sum/prod (integer and bool inputs give int64), amax/amin over attrs['dims']."""
    loops = _lib.loops(lib.rumus_reduce_find, op, dtypes)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        key = ("r", x.shape, x.strides, o.strides, attrs["dims"])
        meta = _get(key)
        if meta is None:
            meta = reduce_meta(key)
        if meta is not EMPTY:
            _run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


def arg_reduction(op: str, dtypes: Sequence[DType]) -> Kernel:
    """argmax/argmin along attrs['dim'] (int64 output, first index on ties)."""
    loops = _lib.loops(lib.rumus_reduce_find, op, dtypes)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        key = ("r", x.shape, x.strides, o.strides, (attrs["dim"],) if x.shape else ())
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


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    # sum/prod also take bool (counting a mask), beyond the schema's NUMERIC
    *((op, reduction(op, ALL), ALL) for op in ("sum", "prod")),
    *((op, reduction(op, NUMERIC), NUMERIC) for op in ("amax", "amin")),
    *((op, arg_reduction(op, NUMERIC), NUMERIC) for op in ("argmax", "argmin")),
    *((op, softmax(op, FLOAT), FLOAT) for op in ("softmax", "log_softmax")),
]
