"""Elementwise kernels: every op of the expression table (rendered into C at build time), where, clamp.

The table's ops and the dtypes claimed for them are derived from rumus_contracts.ops.expressions: an
(op, dtype) is claimed when the C renderer expresses it. Inputs arrive already expanded to the output
shape (stride 0 on broadcast dims), so one layout key (output shape plus every operand's strides)
describes the whole call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg, parse_dtype
from rumus_contracts.ops import expr_c
from rumus_contracts.ops.expressions import Expr, all_kernels

from . import _lib
from ._lib import CACHE_LIMIT, EMPTY, ew_meta, ffi, lib
from .dtypes import ALL, HALF, NUMERIC

_from_buffer = ffi.from_buffer
_ptr = _lib.ptr


class _Layouts(dict[tuple[Any, ...], Any]):
    """Layout key (output shape, every operand's strides) -> its meta array or EMPTY, computed by ew_meta the
    first time (a subscript: one dict lookup on the per-op hot path, no call)."""

    def __missing__(self, key: tuple[Any, ...]) -> Any:
        if len(self) >= CACHE_LIMIT:
            self.clear()
        meta = self[key] = ew_meta(key)
        return meta


_layouts = _Layouts()


_NO_PARAMS = (0.0, 0.0)
run1, run2, run3 = lib.rumus_expr_run1, lib.rumus_expr_run2, lib.rumus_expr_run3


def _params(e: Expr) -> Callable[[Mapping[str, Any]], tuple[float, float]]:
    """attrs -> (p0, p1), the op's parameters in the table's order."""
    names = list(e.params)
    if not names:
        return lambda attrs: _NO_PARAMS
    if len(names) == 1:
        return lambda attrs: (float(attrs[names[0]]), 0.0)
    return lambda attrs: (float(attrs[names[0]]), float(attrs[names[1]]))


def table_kernel(op: str, e: Expr, dtypes: Sequence[DType]) -> Kernel:
    """One closure per arity, as lean as the hand-written kernels were: this is the per-op hot path."""
    loops = _lib.loops(lib.rumus_expr_find, op, dtypes)
    params = _params(e)
    has_params = bool(e.params)  # most ops have none: skip the call on the per-op hot path
    n_in = len(e.inputs)

    def unary(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        meta = _layouts[o.shape, o.strides, x.strides]
        if meta is not EMPTY:
            p0, p1 = params(attrs) if has_params else _NO_PARAMS
            run1(loops[x.dtype.name], meta, o.native or _ptr(o), o.offset, x.native or _ptr(x), x.offset, p0, p1)

    def binary(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o = outputs[0]
        a, b = inputs
        meta = _layouts[o.shape, o.strides, a.strides, b.strides]
        if meta is not EMPTY:
            p0, p1 = params(attrs) if has_params else _NO_PARAMS
            run2(loops[a.dtype.name], meta, o.native or _ptr(o), o.offset, a.native or _ptr(a), a.offset,
                 b.native or _ptr(b), b.offset, p0, p1)

    def ternary(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o = outputs[0]
        a, b, c = inputs
        meta = _layouts[o.shape, o.strides, a.strides, b.strides, c.strides]
        if meta is not EMPTY:
            p0, p1 = params(attrs) if has_params else _NO_PARAMS
            run3(loops[a.dtype.name], meta, o.native or _ptr(o), o.offset, a.native or _ptr(a), a.offset,
                 b.native or _ptr(b), b.offset, c.native or _ptr(c), c.offset, p0, p1)

    kernel: Kernel = (unary, binary, ternary)[n_in - 1]
    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


_WHERE = _lib.loops(lib.rumus_ew_find, "where", ALL)
# where only selects: float16/bfloat16 words move as they are, through the 2-byte (int16) loop
_WHERE.update({dt.name: lib.rumus_ew_find(b"where_i16") for dt in HALF})


def where(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """where(cond, a, b); the loop is chosen by a's dtype, whichever input the dispatcher keyed on."""
    o = outputs[0]
    c, a, b = inputs
    meta = _layouts[o.shape, o.strides, c.strides, a.strides, b.strides]
    if meta is not EMPTY:
        lib.rumus_ew_run3(_WHERE[a.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(c.buffer),
                          c.offset, _from_buffer(a.buffer), a.offset, _from_buffer(b.buffer), b.offset)


_CLAMP = _lib.loops(lib.rumus_ew_find, "clamp", (*NUMERIC, *HALF))
_INF = float("inf")


def clamp(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """Bounds are Python numbers or None; integer inputs are clamped and truncated like a C cast."""
    o, x = outputs[0], inputs[0]
    lo, hi = attrs.get("min"), attrs.get("max")
    meta = _layouts[o.shape, o.strides, x.strides]
    if meta is not EMPTY:
        lib.rumus_ew_run1p(_CLAMP[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer),
                           x.offset, -_INF if lo is None else float(lo), _INF if hi is None else float(hi))


def _table_entries() -> list[tuple[str, Kernel, tuple[DType, ...]]]:
    out = []
    for op, e in all_kernels().items():
        dtypes = tuple(parse_dtype(name) for name in expr_c.supported(op, e))
        if dtypes:
            out.append((op, table_kernel(op, e, dtypes), dtypes))
    return out


# where is also claimed for bool: its schema dispatches on input 0 (cond, always bool).
KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    *_table_entries(),
    ("where", where, (*ALL, *HALF)),
    ("clamp", clamp, (*NUMERIC, *HALF)),
]
