"""Fused optimizer steps, in place: Adam/AdamW (adam_step) and SGD with momentum (sgd_step)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from . import _lib
from ._lib import EMPTY, META, ew_meta, ffi, lib
from .dtypes import FLOAT

_from_buffer = ffi.from_buffer
_ADAM = _lib.loops(lib.rumus_optim_find, "adam", FLOAT)
_SGD = _lib.loops(lib.rumus_optim_find, "sgd", FLOAT)


def adam_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """param, grad, exp_avg, exp_avg_sq; updates param, exp_avg and exp_avg_sq (bias-corrected)."""
    p, g, m, v = inputs
    key = (p.shape, p.strides, g.strides, m.strides, v.strides)
    meta = META.get(key)
    if meta is None:
        meta = ew_meta(key)
    if meta is EMPTY:
        return
    lr, beta1, beta2, step = float(attrs["lr"]), float(attrs["beta1"]), float(attrs["beta2"]), int(attrs["step"])
    bc1, bc2 = 1.0 - beta1**step, 1.0 - beta2**step
    lib.rumus_adam_run(_ADAM[p.dtype.name], meta, _from_buffer(p.buffer), p.offset, _from_buffer(g.buffer), g.offset,
                       _from_buffer(m.buffer), m.offset, _from_buffer(v.buffer), v.offset, lr, beta1, beta2,
                       float(attrs["eps"]), float(attrs["weight_decay"]), bool(attrs["decoupled"]), lr / bc1,
                       math.sqrt(bc2))


def sgd_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """param, grad, momentum_buffer; updates param and (with momentum) momentum_buffer."""
    p, g, buf = inputs
    key = (p.shape, p.strides, g.strides, buf.strides)
    meta = META.get(key)
    if meta is None:
        meta = ew_meta(key)
    if meta is EMPTY:
        return
    lib.rumus_sgd_run(_SGD[p.dtype.name], meta, _from_buffer(p.buffer), p.offset, _from_buffer(g.buffer), g.offset,
                      _from_buffer(buf.buffer), buf.offset, float(attrs["lr"]), float(attrs["momentum"]),
                      float(attrs["dampening"]), float(attrs["weight_decay"]), bool(attrs["nesterov"]),
                      bool(attrs["first"]))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("adam_step", adam_step, FLOAT),
    ("sgd_step", sgd_step, FLOAT),
]
