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
    """The targets as a contiguous int64 array (kept alive by the caller) and its pointer."""
    buf = t.buffer
    n = t.numel
    if n <= _FEW and buf.dtype == np.int64:  # a few int64 targets (a small batch): checked in Python, no copy
        for v in buf[t.offset:t.offset + n].tolist():  # numpy's ufuncs cost microseconds each on tiny arrays
            if v != ignore_index and (v < 0 or v >= classes):
                _out_of_range(op, classes, ignore_index, v)
        return buf, ffi.cast("char *", _from_buffer(buf)) + t.offset * 8
    host = _checked(op, t, classes, ignore_index)
    return host, ffi.cast("char *", _from_buffer(host))


def _checked(op: str, t: TensorArg, classes: int, ignore_index: int) -> np.ndarray:
    """The targets as a contiguous int64 array, every one a class or ignore_index."""
    buf = t.buffer
    host = np.ascontiguousarray(np.asarray(buf)[t.offset:t.offset + t.numel], dtype=np.int64)
    bad = (host != ignore_index) & ((host < 0) | (host >= classes))
    if bad.any():
        _out_of_range(op, classes, ignore_index, int(host[bad][0]))
    return host


_FEW = 32


def _out_of_range(op: str, classes: int, ignore_index: int, got: int) -> None:
    raise IndexOutOfRange(f"{op}: a target class index is out of range for {classes} classes (valid targets "
                          f"are 0..{classes - 1}, or ignore_index={ignore_index}); got {got}")


def _forward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (loss, lse), (x, t, w) = outputs, inputs
    m, c = x.shape
    if m == 0:
        return
    ignore = int(attrs["ignore_index"])
    keep, tp = _targets("cross_entropy", t, c, ignore)
    wp, _, ones = _weights(w, c, x.dtype)
    meta = _new("int64_t[]", [1, m, 1, c, c, 0, 1])  # rows of c logits; one loss per row
    lib.rumus_rows_run_ext(_FWD[x.dtype.name], meta, _from_buffer(loss.buffer), loss.offset, _from_buffer(x.buffer),
                           x.offset, _NULL, 0, _new("char *[10]", [wp, _NULL, _NULL, _NULL, tp, _NULL, _NULL, _NULL,
                                                                   at(lse)]),
                           _new("double[4]", [float(ignore), float(attrs["label_smoothing"])]))
    del keep, ones


def _mean(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """The per-row kernel into a scratch row, then its sum and the weights' sum in float64 on the host, where
    the targets already are (their check reads them): one op for PyTorch's mean instead of five."""
    (loss, lse, total), (x, t, w) = outputs, inputs
    m, c = x.shape
    rows = np.empty(m, x.dtype.numpy)
    if m:
        _forward([TensorArg(rows, (m,), (1,), 0, x.dtype), lse], inputs, attrs)
    ignore = int(attrs["ignore_index"])
    tb = t.buffer
    if m <= _FEW and tb.dtype == np.int64:  # a small batch: Python on the few values (numpy ufuncs cost more)
        kept = [v for v in tb[t.offset:t.offset + m].tolist() if v != ignore]  # checked by _forward
        if w.shape:
            weights = np.asarray(w.buffer)[w.offset:w.offset + c].tolist()
            w_sum = math.fsum(weights[v] for v in kept)
        else:
            w_sum = float(len(kept))
        r_sum = math.fsum(rows.tolist())
    else:
        targets = _checked("cross_entropy", t, c, ignore)
        valid = targets != ignore
        if w.shape:
            w_sum = float(np.sum(np.asarray(w.buffer)[w.offset:w.offset + c][targets[valid]], dtype=np.float64))
        else:
            w_sum = float(np.count_nonzero(valid))
        r_sum = float(np.sum(rows, dtype=np.float64))
    np.asarray(total.buffer)[total.offset] = w_sum
    np.asarray(loss.buffer)[loss.offset] = r_sum / w_sum if w_sum else math.copysign(math.inf, r_sum) if r_sum \
        else math.nan  # x / 0 as IEEE (and PyTorch) divides


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
