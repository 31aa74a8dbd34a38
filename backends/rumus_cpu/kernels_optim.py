"""Fused optimizer steps, in place: Adam/AdamW (adam_step; adam_step_dev_ with the step count and the
GradScaler's skip flag read from device tensors, then adam_step_count_) and SGD with momentum (sgd_step)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg, float32

from . import _lib
from ._lib import EMPTY, META, ew_meta, ffi, lib
from .dtypes import FLOAT

_from_buffer = ffi.from_buffer
_ADAM = _lib.loops(lib.rumus_optim_find, "adam", FLOAT)
_SGD = _lib.loops(lib.rumus_optim_find, "sgd", FLOAT)


def _meta(*args: TensorArg) -> Any:
    """The C loop layout of a step's operands (they share the parameter's shape), cached."""
    key = (args[0].shape, *(a.strides for a in args))
    meta = META.get(key)
    return ew_meta(key) if meta is None else meta


def adam_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """param, grad, exp_avg, exp_avg_sq; updates param, exp_avg and exp_avg_sq (bias-corrected)."""
    p, g, m, v = inputs
    meta = _meta(p, g, m, v)
    if meta is EMPTY:
        return
    lr, beta1, beta2, step = float(attrs["lr"]), float(attrs["beta1"]), float(attrs["beta2"]), int(attrs["step"])
    bc1, bc2 = 1.0 - beta1**step, 1.0 - beta2**step
    lib.rumus_adam_run(_ADAM[p.dtype.name], meta, _from_buffer(p.buffer), p.offset, _from_buffer(g.buffer), g.offset,
                       _from_buffer(m.buffer), m.offset, _from_buffer(v.buffer), v.offset, lr, beta1, beta2,
                       float(attrs["eps"]), float(attrs["weight_decay"]), bool(attrs["decoupled"]), lr / bc1,
                       math.sqrt(bc2))


def adam_step_dev_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """param, grad, exp_avg, exp_avg_sq, [max_exp_avg_sq], step, found_inf (the op's list spelled out): the
    bias corrections from step + 1 and the skip are decided in C, from the tensors' values."""
    p, g, m, v, *vmax, step, flag = inputs
    meta = _meta(p, g, m, v)
    if meta is EMPTY:
        return
    x = vmax[0] if vmax else None
    lib.rumus_adam_dev_run(_ADAM[p.dtype.name], meta, _from_buffer(p.buffer), p.offset, _from_buffer(g.buffer),
                           g.offset, _from_buffer(m.buffer), m.offset, _from_buffer(v.buffer), v.offset,
                           ffi.NULL if x is None else _from_buffer(x.buffer), 0 if x is None else x.offset,
                           _from_buffer(step.buffer), step.offset, _from_buffer(flag.buffer), flag.offset,
                           float(attrs["lr"]), float(attrs["beta1"]), float(attrs["beta2"]), float(attrs["eps"]),
                           float(attrs["weight_decay"]), bool(attrs["decoupled"]), bool(attrs["maximize"]))


def adam_step_count_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """steps[0..n), found_inf: every count += 1 unless the flag is raised."""
    *steps, flag = inputs
    if steps:
        lib.rumus_adam_step_count(len(steps), [_from_buffer(s.buffer) for s in steps], [s.offset for s in steps],
                                  _from_buffer(flag.buffer), flag.offset)


def sgd_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """param, grad, momentum_buffer; updates param and (with momentum) momentum_buffer."""
    p, g, buf = inputs
    meta = _meta(p, g, buf)
    if meta is EMPTY:
        return
    lib.rumus_sgd_run(_SGD[p.dtype.name], meta, _from_buffer(p.buffer), p.offset, _from_buffer(g.buffer), g.offset,
                      _from_buffer(buf.buffer), buf.offset, float(attrs["lr"]), float(attrs["momentum"]),
                      float(attrs["dampening"]), float(attrs["weight_decay"]), bool(attrs["nesterov"]),
                      bool(attrs["first"]))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("adam_step", adam_step, FLOAT),
    ("adam_step_dev_", adam_step_dev_, FLOAT),
    ("adam_step_count_", adam_step_count_, (float32,)),
    ("sgd_step", sgd_step, FLOAT),
]
