"""Fused cross-entropy forward / backward (csrc/cross_entropy.c) on contiguous [M, C] logits.

The targets are checked here, on the host where they already live: a target outside 0..C-1 that is not
ignore_index raises IndexOutOfRange before the C loop runs (which then indexes without checks). A 0-d
weight is the "no class weights" placeholder (NULL in C). float16/bfloat16 run the float32 loops on
widened copies and round once (widen.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import IndexOutOfRange, Kernel, TensorArg

from ._lib import ffi, lib, ptr
from .dtypes import FLOAT, HALF
from .widen import widened_to_float32

_SFX = {"float32": ("float *", "f32"), "float64": ("double *", "f64")}


def _p(arg: TensorArg) -> Any:
    return ffi.cast(_SFX[arg.dtype.name][0], arg.native or ptr(arg)) + arg.offset


def _weight(arg: TensorArg) -> Any:
    return _p(arg) if arg.shape else ffi.NULL


def _targets(op: str, t: TensorArg, classes: int, ignore_index: int) -> tuple[np.ndarray, Any]:
    """The targets as a contiguous int64 array (kept alive by the caller) and its pointer."""
    buf = t.buffer
    n = t.numel
    if n <= _FEW and buf.dtype == np.int64:  # a few int64 targets (a small batch): checked in Python, no copy
        for v in buf[t.offset:t.offset + n].tolist():  # numpy's ufuncs cost microseconds each on tiny arrays
            if v != ignore_index and (v < 0 or v >= classes):
                _out_of_range(op, classes, ignore_index, v)
        return buf, ffi.cast("int64_t *", t.native or ptr(t)) + t.offset
    host = np.ascontiguousarray(np.asarray(buf)[t.offset:t.offset + n], dtype=np.int64)
    bad = (host != ignore_index) & ((host < 0) | (host >= classes))
    if bad.any():
        _out_of_range(op, classes, ignore_index, int(host[bad][0]))
    return host, ffi.cast("int64_t *", ffi.from_buffer(host))


_FEW = 32


def _out_of_range(op: str, classes: int, ignore_index: int, got: int) -> None:
    raise IndexOutOfRange(f"{op}: a target class index is out of range for {classes} classes (valid targets "
                          f"are 0..{classes - 1}, or ignore_index={ignore_index}); got {got}")


def _forward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (loss, lse), (x, t, w) = outputs, inputs
    m, c = x.shape
    ignore = int(attrs["ignore_index"])
    keep, tp = _targets("cross_entropy", t, c, ignore)
    fn = _FWD[x.dtype.name]
    fn(_p(x), tp, _weight(w), _p(loss), _p(lse), m, c, ignore, float(attrs["label_smoothing"]))
    del keep


def _backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    dx, (g, x, t, w, lse) = outputs[0], inputs
    m, c = x.shape
    ignore = int(attrs["ignore_index"])
    keep, tp = _targets("cross_entropy", t, c, ignore)
    fn = _BWD[x.dtype.name]
    fn(_p(g), _p(x), tp, _weight(w), _p(lse), _p(dx), m, c, ignore, float(attrs["label_smoothing"]))
    del keep


_FWD = {name: getattr(lib, f"rumus_cross_entropy_fwd_{sfx}") for name, (_, sfx) in _SFX.items()}
_BWD = {name: getattr(lib, f"rumus_cross_entropy_bwd_{sfx}") for name, (_, sfx) in _SFX.items()}

KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    ("cross_entropy_fwd", _forward, FLOAT),
    ("cross_entropy_bwd", _backward, FLOAT),
    ("cross_entropy_fwd", widened_to_float32(_forward), HALF),
    ("cross_entropy_bwd", widened_to_float32(_backward), HALF),
]
