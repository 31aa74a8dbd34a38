"""The row ops of the row-op table (rumus_contracts/ops/row_ops.py): softmax, log_softmax and their fused
backward ops along attrs['dim'], logsumexp over attrs['dims'], layer_norm and rms_norm and their backward
ops over the trailing weight dims, group_norm and its backward over (sample, group) rows with per-channel
weights (grouped columns), rendered to C by row_c.py (csrc/internal/row_loops.h runs them).
float16/bfloat16 rows compute in double and round each result once, as every non-contiguous row does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import Kernel, RumusError, TensorArg
from rumus_contracts.ops.row_ops import ROW_OPS

from . import _lib
from ._lib import EMPTY, META, _merge, _store, ffi, lib, softmax_meta
from .dtypes import FLOAT, HALF
from .kernels_memory import copy

_from_buffer = ffi.from_buffer
_new = ffi.new
_get = META.get
_DTYPES = (*FLOAT, *HALF)
_NULL = ffi.NULL
_ZERO = {2: "uint16_t *", 4: "float *", 8: "double *"}


def _meta(x: TensorArg, o: TensorArg, dim: int) -> Any:
    key = ("s", x.shape, x.strides, o.strides, dim)
    meta = _get(key)
    return softmax_meta(key) if meta is None else meta


def at(arg: TensorArg) -> Any:
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
        c0 = at(cols[0])
        c1 = at(cols[1]) if len(cols) > 1 else _NULL
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


def norm_backward_kernel(op: str) -> Kernel:
    """A norm backward of the table: (grad, x, weight) -> (dx, dweight[, dbias]) over x seen as
    [rows, weight.numel] (contiguous operands, as the schema makes them); the weight and bias gradients are
    the entry's column sums."""
    loops = _lib.loops(lib.rumus_rows_find, op, _DTYPES)
    run = lib.rumus_rows_run_ext

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        (gx, *sums), (g, x, w) = outputs, inputs
        n = w.numel
        rows = x.numel // n if n else 0
        key = ("n", rows, n)  # rows may be 0: the column sums are then zeros, so never the EMPTY layout
        meta = _get(key) or _store(key, [1, rows, n, n, n, 1, 1])
        ptrs = _new("char *[10]", [at(w), _NULL, *(at(s) for s in sums)])
        run(loops[x.dtype.name], meta, _from_buffer(gx.buffer), gx.offset, _from_buffer(g.buffer), g.offset,
            _from_buffer(x.buffer), x.offset, ptrs, _new("double[4]", [float(attrs["eps"])]))

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


def grouped_kernel(op: str) -> Kernel:
    """Group norm (forward: (x, weight, bias) -> y; backward: (grad, x, weight) -> (dx, dweight, dbias), the
    weight gradients the entry's column sums) over x [N, C, *] seen as N * G rows of C / G channels of S
    (the spatial size) contiguous elements, G = attrs['num_groups'], the weight and bias per channel."""
    entry = ROW_OPS[op]
    loops = _lib.loops(lib.rumus_rows_find, op, _DTYPES)
    run = lib.rumus_rows_run_ext
    backward = bool(entry.column_sums)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, sums = outputs[0], outputs[1:]
        x = inputs[1] if backward else inputs[0]
        groups = int(attrs["num_groups"])
        s = 1
        for d in x.shape[2:]:
            s *= d
        rows, n = x.shape[0] * groups, x.shape[1] // groups * s
        if n == 0:  # no elements a row: the weight gradients are sums of nothing
            for a in sums:
                _strided(a)[...] = 0
            return
        meta = _get(key := ("n", rows, n)) or _store(key, [1, rows, n, n, n, 1, 1])
        prm = _new("double[6]", [float(attrs["eps"]), 0.0, 0.0, 0.0, float(groups), float(s)])
        if backward:
            g, w = inputs[0], inputs[2]
            ptrs = _new("char *[10]", [at(w), _NULL, *(at(a) for a in sums)])
            run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(g.buffer), g.offset,
                _from_buffer(x.buffer), x.offset, ptrs, prm)
        else:
            ptrs = _new("char *[10]", [at(inputs[1]), at(inputs[2])])
            run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(x.buffer), x.offset,
                _NULL, 0, ptrs, prm)

    kernel.__name__ = kernel.__qualname__ = f"cpu_{op}"
    return kernel


def _lse_layout(shape: tuple[int, ...], xst: tuple[int, ...], ost: tuple[int, ...],
                dims: tuple[int, ...]) -> list[int] | None:
    """The row layout of a logsumexp over `dims` (a kept dim of size 0: []); None where the reduced dims do
    not merge into one strided run."""
    kept: list[tuple[int, tuple[int, ...]]] = [(k, (ost[d], xst[d])) for d, k in enumerate(shape)
                                               if d not in dims and k != 1]
    if any(k == 0 for k, _ in kept):
        return []
    red: list[tuple[int, tuple[int, ...]]] = sorted(((shape[d], (xst[d],)) for d in dims if shape[d] != 1),
                                                    key=lambda item: -abs(item[1][0]))
    merged = _merge(red) if red else [(1, (0,))]  # no reduced elements beyond one: a row of one
    if len(merged) > 1:
        return None
    kept = _merge(kept)
    length, (stride,) = merged[0]
    return [len(kept), *(k for k, _ in kept), *(s[0] for _, s in kept), *(s[1] for _, s in kept), length, 0, stride]


def _strided(arg: TensorArg) -> np.ndarray:
    """The operand as a numpy view of its buffer."""
    buf = arg.buffer
    return np.lib.stride_tricks.as_strided(buf[arg.offset:], arg.shape, tuple(s * buf.itemsize for s in arg.strides))


def logsumexp_kernel() -> Kernel:
    """logsumexp over attrs['dims'] into the keepdim output: one row-op call where the reduced dims merge into
    one strided run, else on a contiguous copy with the reduced dims last."""
    loops = _lib.loops(lib.rumus_rows_find, "logsumexp", _DTYPES)
    run = lib.rumus_rows_run

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        nd = len(x.shape)
        dims = tuple(sorted({int(d) % nd for d in attrs["dims"]})) if nd else ()
        if not o.numel:
            return
        if any(x.shape[d] == 0 for d in dims):  # a sum of no terms is 0: its log is -inf, as PyTorch's
            _strided(o)[...] = -np.inf if o.buffer.dtype.kind == "f" else _NEG_INF_BITS[o.dtype.name]
            return
        key = ("l", x.shape, x.strides, o.strides, dims)
        meta = _get(key)
        xb, xo, keep = x.buffer, x.offset, None
        if meta is None:
            layout = _lse_layout(x.shape, x.strides, o.strides, dims)
            if layout is None:  # reduced dims that do not merge: a copy with them last, contiguous
                order = [*(d for d in range(nd) if d not in dims), *dims]
                st = [0] * nd
                step = 1
                for d in reversed(order):
                    st[d], step = step, step * x.shape[d]
                keep = np.empty(x.numel, x.buffer.dtype)
                copy([TensorArg(keep, x.shape, tuple(st), 0, x.dtype)], [x], {"dtype": x.dtype})
                layout = _lse_layout(x.shape, tuple(st), o.strides, dims)
                assert layout is not None
                meta = ffi.new("int64_t[]", layout)
                xb, xo = keep, 0
            else:
                meta = _store(key, layout or None)
        if meta is EMPTY:
            return
        run(loops[x.dtype.name], meta, _from_buffer(o.buffer), o.offset, _from_buffer(xb), xo, _NULL, 0, _NULL,
            _NULL, 0.0, 0.0)
        del keep

    kernel.__name__ = kernel.__qualname__ = "cpu_logsumexp"
    return kernel


_NEG_INF_BITS = {"float16": 0xFC00, "bfloat16": 0xFF80}  # -inf in the 16-bit words a half type is stored as


def _kernel(op: str) -> Kernel:
    entry = ROW_OPS[op]
    if entry.grouped_columns:
        return grouped_kernel(op)
    if entry.per_row:
        return logsumexp_kernel()
    if entry.column_sums:
        return norm_backward_kernel(op)
    return norm_kernel(op) if entry.columns else row_kernel(op)


# the entries with row operands (cross-entropy) are bound by kernels_cross_entropy.py
KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    (op, _kernel(op), _DTYPES) for op in ROW_OPS if not ROW_OPS[op].row_inputs]
