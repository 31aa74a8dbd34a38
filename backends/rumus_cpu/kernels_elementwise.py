"""Elementwise kernels: unary math, binary arithmetic, comparisons, where, clamp.

Inputs arrive already expanded to the output shape (stride 0 on broadcast dims), so one layout key
(output shape plus every operand's strides) describes the whole call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from . import _lib
from ._lib import EMPTY, META, ew_meta, ffi, lib
from .dtypes import ALL, FLOAT, NUMERIC, SIGNED

UNARY: dict[str, tuple[DType, ...]] = {
    "neg": SIGNED, "abs": SIGNED, "relu": SIGNED, "exp": FLOAT, "log": FLOAT, "sqrt": FLOAT,
    "rsqrt": FLOAT, "sin": FLOAT, "cos": FLOAT, "tanh": FLOAT, "sigmoid": FLOAT,
}
BINARY: dict[str, tuple[DType, ...]] = {
    "add": NUMERIC, "sub": NUMERIC, "mul": NUMERIC, "div": FLOAT, "pow": FLOAT, "maximum": NUMERIC,
    "minimum": NUMERIC,
}
COMPARE: dict[str, tuple[DType, ...]] = {name: ALL for name in ("eq", "ne", "lt", "le", "gt", "ge")}

_from_buffer = ffi.from_buffer
_get = META.get


def unary(op: str, dtypes: Sequence[DType]) -> Kernel:
    loops = _lib.loops(lib.rumus_ew_find, op, dtypes)
    run = lib.rumus_ew_run1

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        key = (o.shape, o.strides, x.strides)
        meta = _get(key)
        if meta is None:
            meta = ew_meta(key)
        if meta is not EMPTY:
            run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


def binary(op: str, dtypes: Sequence[DType]) -> Kernel:
    """Arithmetic (output dtype = input dtype) and comparisons (bool output) alike."""
    loops = _lib.loops(lib.rumus_ew_find, op, dtypes)
    run = lib.rumus_ew_run2

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o = outputs[0]
        a, b = inputs
        key = (o.shape, o.strides, a.strides, b.strides)
        meta = _get(key)
        if meta is None:
            meta = ew_meta(key)
        if meta is not EMPTY:
            run(loops[a.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(a.buffer), a.offset,
                _from_buffer(b.buffer), b.offset)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


_WHERE = _lib.loops(lib.rumus_ew_find, "where", ALL)


def where(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """where(cond, a, b); the loop is chosen by a's dtype, whichever input the dispatcher keyed on."""
    o = outputs[0]
    c, a, b = inputs
    key = (o.shape, o.strides, c.strides, a.strides, b.strides)
    meta = _get(key)
    if meta is None:
        meta = ew_meta(key)
    if meta is not EMPTY:
        lib.rumus_ew_run3(_WHERE[a.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(c.buffer),
                          c.offset, _from_buffer(a.buffer), a.offset, _from_buffer(b.buffer), b.offset)


_CLAMP = _lib.loops(lib.rumus_ew_find, "clamp", NUMERIC)
_INF = float("inf")


def clamp(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """Bounds are Python numbers or None; integer inputs are clamped and truncated like a C cast."""
    o, x = outputs[0], inputs[0]
    lo, hi = attrs.get("min"), attrs.get("max")
    key = (o.shape, o.strides, x.strides)
    meta = _get(key)
    if meta is None:
        meta = ew_meta(key)
    if meta is not EMPTY:
        lib.rumus_ew_run1p(_CLAMP[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer),
                           x.offset, -_INF if lo is None else float(lo), _INF if hi is None else float(hi))


# where is also claimed for bool: its schema dispatches on input 0 (cond, always bool).
KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    *((op, unary(op, dts), dts) for op, dts in UNARY.items()),
    *((op, binary(op, dts), dts) for op, dts in {**BINARY, **COMPARE}.items()),
    ("where", where, ALL),
    ("clamp", clamp, NUMERIC),
]
