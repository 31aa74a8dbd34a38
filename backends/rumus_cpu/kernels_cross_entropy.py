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

from ._lib import ffi, lib
from .dtypes import FLOAT, HALF
from .widen import widened_to_float32

_SFX = {"float32": ("float *", "f32"), "float64": ("double *", "f64")}


def _p(arg: TensorArg) -> Any:
    return ffi.cast(_SFX[arg.dtype.name][0], ffi.from_buffer(arg.buffer)) + arg.offset


def _weight(arg: TensorArg) -> Any:
    return _p(arg) if arg.shape else ffi.NULL


def _targets(op: str, t: TensorArg, classes: int, ignore_index: int) -> tuple[np.ndarray, Any]:
    """The targets as a contiguous int64 array (kept alive by the caller) and its pointer."""
    host = np.ascontiguousarray(np.asarray(t.buffer)[t.offset:t.offset + t.numel], dtype=np.int64)
    bad = (host != ignore_index) & ((host < 0) | (host >= classes))
    if bad.any():
        raise IndexOutOfRange(f"{op}: a target class index is out of range for {classes} classes (valid targets "
                              f"are 0..{classes - 1}, or ignore_index={ignore_index}); got {int(host[bad][0])}")
    return host, ffi.cast("int64_t *", ffi.from_buffer(host))


def _forward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (loss, lse), (x, t, w) = outputs, inputs
    m, c = x.shape
    ignore = int(attrs["ignore_index"])
    keep, tp = _targets("cross_entropy", t, c, ignore)
    fn = getattr(lib, f"rumus_cross_entropy_fwd_{_SFX[x.dtype.name][1]}")
    fn(_p(x), tp, _weight(w), _p(loss), _p(lse), m, c, ignore, float(attrs["label_smoothing"]))
    del keep


def _backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    dx, (g, x, t, w, lse) = outputs[0], inputs
    m, c = x.shape
    ignore = int(attrs["ignore_index"])
    keep, tp = _targets("cross_entropy", t, c, ignore)
    fn = getattr(lib, f"rumus_cross_entropy_bwd_{_SFX[x.dtype.name][1]}")
    fn(_p(g), _p(x), tp, _weight(w), _p(lse), _p(dx), m, c, ignore, float(attrs["label_smoothing"]))
    del keep


KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    ("cross_entropy_fwd", _forward, FLOAT),
    ("cross_entropy_bwd", _backward, FLOAT),
    ("cross_entropy_fwd", widened_to_float32(_forward), HALF),
    ("cross_entropy_bwd", widened_to_float32(_backward), HALF),
]
