"""Cross-entropy forward / backward on contiguous [M, C] logits: the cross_entropy_fwd and cross_entropy_bwd
row ops of the row-op table (rumus_contracts/ops/row_ops.py, rendered by row_c.py).

The targets are checked here, on the host where they already live: a target outside 0..C-1 that is not
ignore_index raises IndexOutOfRange before the C loop runs. A 0-d weight is the "no class weights"
placeholder: the rows then read a weight of 1 for every class. float16/bfloat16 run the float32 rows on
widened copies and round once (widen.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import IndexOutOfRange, Kernel, TensorArg

from . import _lib
from ._lib import ffi, lib
from .dtypes import FLOAT, HALF
from .kernels_row_ops import at
from .widen import widened_to_float32

_from_buffer = ffi.from_buffer
_new = ffi.new
_NULL = ffi.NULL
_FWD = _lib.loops(lib.rumus_rows_find, "cross_entropy_fwd", FLOAT)
_BWD = _lib.loops(lib.rumus_rows_find, "cross_entropy_bwd", FLOAT)
_ONES: dict[tuple[int, str], np.ndarray] = {}  # (classes, dtype) -> the weights of "no class weights"


def _weights(w: TensorArg, classes: int, dtype: Any) -> tuple[Any, float, Any]:
    """(pointer, sum, owner) of the class weights: all 1 for the 0-d placeholder."""
    if w.shape:
        host = np.asarray(w.buffer)[w.offset:w.offset + classes]
        return at(w), math.fsum(host.tolist()), None
    ones = _ONES.get((classes, dtype.name))
    if ones is None:
        if len(_ONES) > 64:
            _ONES.clear()
        ones = _ONES[(classes, dtype.name)] = np.ones(classes, dtype.numpy)
    return _from_buffer(ones), float(classes), ones


def _targets(op: str, t: TensorArg, classes: int, ignore_index: int) -> tuple[np.ndarray, Any]:
    """The targets as a contiguous int64 array of t's length (kept alive by the caller), checked, and its
    pointer."""
    buf = t.buffer
    n = t.numel
    if n <= _FEW and buf.dtype == np.int64:  # a few int64 targets (a small batch): checked in Python, no copy
        view = buf[t.offset:t.offset + n]
        for v in view.tolist():  # numpy's ufuncs cost microseconds each on tiny arrays
            if v != ignore_index and (v < 0 or v >= classes):
                _out_of_range(op, classes, ignore_index, v)
        return view, ffi.cast("char *", _from_buffer(buf)) + t.offset * 8
    host = np.ascontiguousarray(np.asarray(buf)[t.offset:t.offset + n], dtype=np.int64)
    bad = (host != ignore_index) & ((host < 0) | (host >= classes))
    if bad.any():
        _out_of_range(op, classes, ignore_index, int(host[bad][0]))
    return host, ffi.cast("char *", _from_buffer(host))


_FEW = 32


def _out_of_range(op: str, classes: int, ignore_index: int, got: int) -> None:
    raise IndexOutOfRange(f"{op}: a target class index is out of range for {classes} classes (valid targets "
                          f"are 0..{classes - 1}, or ignore_index={ignore_index}); got {got}")


def _forward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _forward_rows(outputs, inputs, attrs)


def _forward_rows(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> np.ndarray:
    """cross_entropy_fwd; returns the checked targets (int64, one per row)."""
    (loss, lse), (x, t, w) = outputs, inputs
    m, c = x.shape
    if m == 0:
        return np.zeros(0, np.int64)
    ignore = int(attrs["ignore_index"])
    targets, tp = _targets("cross_entropy", t, c, ignore)
    wp, _, ones = _weights(w, c, x.dtype)
    meta = _new("int64_t[]", [1, m, 1, c, c, 0, 1])  # rows of c logits; one loss per row
    lib.rumus_rows_run_ext(_FWD[x.dtype.name], meta, _from_buffer(loss.buffer), loss.offset, _from_buffer(x.buffer),
                           x.offset, _NULL, 0, _new("char *[10]", [wp, _NULL, _NULL, _NULL, tp, _NULL, _NULL, _NULL,
                                                                   at(lse)]),
                           _new("double[4]", [float(ignore), float(attrs["label_smoothing"])]))
    del ones
    return targets


def _mean(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """The per-row kernel into a scratch row, then its sum and the weights' sum in float64 on the host, where
    the targets already are (their check reads them): one op for PyTorch's mean instead of five."""
    (loss, lse, total), (x, _, w) = outputs, inputs
    m, c = x.shape
    rows = np.empty(m, x.dtype.numpy)
    targets = _forward_rows([TensorArg(rows, (m,), (1,), 0, x.dtype), lse], inputs, attrs)
    ignore = int(attrs["ignore_index"])
    weights = np.asarray(w.buffer)[w.offset:w.offset + c] if w.shape else None
    if m <= _FEW:  # a small batch: Python on the few values (numpy's ufuncs cost microseconds each)
        kept = [v for v in targets.tolist() if v != ignore]
        if weights is not None:
            listed = weights.tolist()
            w_sum = math.fsum(listed[v] for v in kept)
        else:
            w_sum = float(len(kept))
        r_sum = math.fsum(rows.tolist())
    else:
        valid = targets != ignore
        w_sum = float(np.sum(weights[targets[valid]], dtype=np.float64) if weights is not None
                      else np.count_nonzero(valid))
        r_sum = float(np.sum(rows, dtype=np.float64))
    np.asarray(total.buffer)[total.offset] = w_sum
    # r_sum / w_sum as IEEE (and PyTorch) divides: x / 0 is +-inf, 0 / 0 NaN
    np.asarray(loss.buffer)[loss.offset] = r_sum / w_sum if w_sum else math.copysign(math.inf, r_sum) if r_sum \
        else math.nan


def _backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    dx, (g, x, t, w, lse) = outputs[0], inputs
    m, c = x.shape
    if m == 0:
        return
    ignore = int(attrs["ignore_index"])
    keep, tp = _targets("cross_entropy", t, c, ignore)
    wp, wsum, ones = _weights(w, c, x.dtype)
    meta = _new("int64_t[]", [1, m, c, c, c, 1, 1])
    lib.rumus_rows_run_ext(_BWD[x.dtype.name], meta, _from_buffer(dx.buffer), dx.offset, _from_buffer(x.buffer),
                           x.offset, _NULL, 0, _new("char *[10]", [wp, _NULL, _NULL, _NULL, at(g), tp, at(lse)]),
                           _new("double[4]", [float(ignore), float(attrs["label_smoothing"]), wsum]))
    del keep, ones


KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    ("cross_entropy_fwd", _forward, FLOAT),
    ("cross_entropy_bwd", _backward, FLOAT),
    ("cross_entropy_mean", _mean, FLOAT),
    ("cross_entropy_mean", widened_to_float32(_mean), HALF),
    ("cross_entropy_fwd", widened_to_float32(_forward), HALF),
    ("cross_entropy_bwd", widened_to_float32(_backward), HALF),
]
