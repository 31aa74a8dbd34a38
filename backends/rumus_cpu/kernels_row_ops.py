"""The row ops of the row-op table (rumus_contracts/ops/row_ops.py): softmax, log_softmax and their fused
backward ops along attrs['dim'], layer_norm and rms_norm over the trailing weight dims, rendered to C by
row_c.py (csrc/internal/row_loops.h runs them). float16/bfloat16 rows compute in double and round each
result once, as every non-contiguous row does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, RumusError, TensorArg
from rumus_contracts.ops.row_ops import ROW_OPS

from . import _lib
from ._lib import EMPTY, META, ffi, lib, softmax_meta
from .dtypes import FLOAT, HALF

_from_buffer = ffi.from_buffer
_get = META.get
_DTYPES = (*FLOAT, *HALF)
_NULL = ffi.NULL
_ZERO = {2: "uint16_t *", 4: "float *", 8: "double *"}


def _meta(x: TensorArg, o: TensorArg, dim: int) -> Any:
    key = ("s", x.shape, x.strides, o.strides, dim)
    meta = _get(key)
    return softmax_meta(key) if meta is None else meta


def _at(arg: TensorArg) -> Any:
    """A pointer to the operand's first element (column operands arrive offset)."""
    return ffi.cast("char *", _from_buffer(arg.buffer)) + arg.offset * arg.dtype.itemsize


def norm_kernel(op: str) -> Kernel:
    """A norm of the table over x seen as [rows, weight.numel] (the schema makes every operand contiguous);
    weight (and bias) are its column operands, attrs['eps'] its parameter."""
    loops = _lib.loops(lib.rumus_rows_find, op, _DTYPES)
    run = lib.rumus_rows_run
    eps_default = dict(ROW_OPS[op].params)["eps"]

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        y, x, cols = outputs[0], inputs[0], inputs[1:]
        n = cols[0].numel
        rows = x.numel // n if n else 0
        meta = _get(key := ("s", (rows, n), (n, 1), (n, 1), 1)) or softmax_meta(key)
        if meta is EMPTY:
            return
        c0 = _at(cols[0])
        c1 = _at(cols[1]) if len(cols) > 1 else _NULL
        run(loops[x.dtype.name], meta, _from_buffer(y.buffer), y.offset, _from_buffer(x.buffer), x.offset, _NULL, 0,
            c0, c1, float(attrs.get("eps", eps_default)), 0.0)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


def row_kernel(op: str) -> Kernel:
    """The row op `op` along attrs['dim']: forward ops take x, backward ops (grad, y) in one layout."""
    loops = _lib.loops(lib.rumus_rows_find, op, _DTYPES)
    run = lib.rumus_rows_run
    two = len(ROW_OPS[op].inputs) == 2

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        if two:
            y = inputs[1]
            if y.strides != x.strides:
                raise RumusError(f"cpu {op}: grad and y must share one layout, got strides {x.strides} and "
                                 f"{y.strides}")
            if not x.shape:  # a 0-d softmax is constant: its gradient is 0
                ffi.cast(_ZERO[o.dtype.itemsize], _from_buffer(o.buffer))[o.offset] = 0  # +0.0 in every float type
                return
        meta = _meta(x, o, int(attrs["dim"]) if x.shape else 0)
        if meta is EMPTY:
            return
        yb, yo = (_from_buffer(inputs[1].buffer), inputs[1].offset) if two else (_NULL, 0)
        run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset, yb, yo,
            _NULL, _NULL, 0.0, 0.0)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    (op, norm_kernel(op) if ROW_OPS[op].columns else row_kernel(op), _DTYPES) for op in ROW_OPS]
