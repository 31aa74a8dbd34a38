"""Fused optimizer steps (adam_step, sgd_step): one dispatch per parameter, updating in place."""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg

from .layout import WG, device_of, grid, new_buffer, remember
from .pipelines import render, wgsl_scalar


def _dispatch(entry: str, args: Sequence[TensorArg], flags: int, consts: Sequence[float]) -> None:
    n = args[0].numel
    if n == 0:
        return
    dev = device_of([], args)
    buffers = [a.buffer for a in args]
    if len(set(buffers)) != len(args):  # WgpuBuffer hashes by identity
        raise RumusError(f"{entry}_step: parameter, gradient and state tensors must not share memory")
    dtype = args[0].dtype
    offsets = tuple([a.offset for a in args])
    # program, grid and the integer header depend only on these (cached per device); the constants
    # (learning rate, bias corrections) change every step and are packed per call
    key = ("optim", entry, dtype, n, offsets, flags)
    hit = dev.launch_plans.get(key)
    if hit is None:
        prog = dev.programs.get(("optim", entry, dtype.name), lambda: render("optim", scalar=wgsl_scalar(dtype)),
                                entry_point=entry)
        offs = list(offsets)
        if len(offs) < 4:  # sgd: state2 is unused, a dummy is bound
            offs.append(0)
        x, y, z = grid((n + WG - 1) // WG, dev.max_groups)
        hit = (prog, (x, y, z), struct.pack("<4I4I", n, x * WG, flags, 0, *offs))
        remember(dev.launch_plans, key, hit)
    prog, groups, header = hit
    if len(buffers) < 4:  # sgd: state2 is unused, bind a dummy
        dummy = getattr(dev, "_optim_dummy", None)
        if dummy is None:
            dummy = dev._optim_dummy = new_buffer(dev, 16)
        buffers.append(dummy)
    data = header + struct.pack("<12f", *consts, *([0.0] * (12 - len(consts))))
    dev.recorder.dispatch(prog, buffers, data, groups)


def adam_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    lr, b1, b2 = float(attrs["lr"]), float(attrs["beta1"]), float(attrs["beta2"])
    wd, step = float(attrs.get("weight_decay", 0.0)), int(attrs.get("step", 1))
    decoupled = bool(attrs.get("decoupled", False))
    bc1, bc2 = 1.0 - b1 ** step, 1.0 - b2 ** step
    coupled = 1 if wd and not decoupled else 0
    decay = 1.0 - lr * wd if wd and decoupled else 1.0
    _dispatch("adam", inputs, coupled, [lr / bc1, b1, 1.0 - b1, float(attrs["eps"]),
                                        wd, decay, 1.0 / math.sqrt(bc2), b2, 1.0 - b2])


def sgd_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    momentum = float(attrs.get("momentum", 0.0))
    flags = (1 if momentum else 0) | (2 if attrs.get("nesterov") else 0) | (4 if attrs.get("first", True) else 0)
    _dispatch("sgd", inputs, flags, [float(attrs["lr"]), momentum, 1.0 - float(attrs.get("dampening", 0.0)),
                                     float(attrs.get("weight_decay", 0.0))])


def kernels() -> dict[str, Any]:
    return {"adam_step": adam_step, "sgd_step": sgd_step}
