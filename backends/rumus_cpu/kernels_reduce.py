"""Reductions (sum, prod, amax, amin) and argmax/argmin; keepdim outputs (softmax: kernels_row_ops.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from . import _lib
from ._lib import EMPTY, META, ffi, lib, reduce_meta
from .dtypes import ALL, HALF, NUMERIC

_from_buffer = ffi.from_buffer
_ptr = _lib.ptr
_get = META.get


def _sum_key(x: TensorArg, o: TensorArg, attrs: Mapping[str, Any]) -> tuple[Any, ...]:
    return ("r", x.shape, x.strides, o.strides, attrs["dims"])


def _arg_key(x: TensorArg, o: TensorArg, attrs: Mapping[str, Any]) -> tuple[Any, ...]:
    return ("r", x.shape, x.strides, o.strides, (attrs["dim"],) if x.shape else ())


_Key = Callable[[TensorArg, TensorArg, Mapping[str, Any]], tuple[Any, ...]]


def reduction(op: str, dtypes: Sequence[DType], key_of: _Key = _sum_key) -> Kernel:
    """sum/prod (integer and bool inputs give int64), amax/amin over attrs['dims']; with _arg_key,
    argmax/argmin along attrs['dim'] (int64 output, first index on ties)."""
    loops = _lib.loops(lib.rumus_reduce_find, op, dtypes)
    run = lib.rumus_reduce_run

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        key = key_of(x, o, attrs)
        meta = _get(key)
        if meta is None:
            meta = reduce_meta(key)
        if meta is not EMPTY:
            run(loops[x.dtype.name], meta, o.native or _ptr(o), o.offset, x.native or _ptr(x), x.offset)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


_ALL, _NUMERIC = (*ALL, *HALF), (*NUMERIC, *HALF)  # float16/bfloat16: in float32

KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    # sum/prod also take bool (counting a mask), beyond the schema's NUMERIC
    *((op, reduction(op, _ALL), _ALL) for op in ("sum", "prod")),
    *((op, reduction(op, _NUMERIC), _NUMERIC) for op in ("amax", "amin")),
    *((op, reduction(op, _NUMERIC, _arg_key), _NUMERIC) for op in ("argmax", "argmin")),
]
