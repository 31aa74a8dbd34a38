"""Fused optimizer steps (adam_step, adam_step_dev_, sgd_step): one dispatch per parameter, updating in place;
adam_step_count_: one dispatch per group of step counts (shaders/optim.wgsl, shaders/adam_step_count.wgsl)."""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rumus_contracts import RumusError, TensorArg

from .amp import _groups
from .layout import WG, device_of, grid, new_buffer, remember
from .pipelines import render, wgsl_scalar

_SLOTS = 7  # storage bindings of shaders/optim.wgsl: param, grad, state1, state2, state3, count, skip
_DEVICE_STEP = 8  # adam's flag bit: step count and skip flag read from bindings 5 and 6


def _dummies(dev: Any, k: int) -> list[Any]:
    """k distinct 16-byte buffers for the bindings an entry leaves unused (one buffer bound twice
    read-write is refused)."""
    have = getattr(dev, "_optim_dummies", None)
    if have is None or len(have) < k:
        have = dev._optim_dummies = [new_buffer(dev, 16) for _ in range(_SLOTS)]
    return list(have[:k])


def _dispatch(entry: str, args: Sequence[TensorArg | None], flags: int, consts: Sequence[float]) -> None:
    """args in binding order (None: unused, a dummy is bound); args[0] is the parameter."""
    param = args[0]
    assert param is not None
    n = param.numel
    if n == 0:
        return
    used = [a for a in args if a is not None]
    dev = device_of([], used)
    if len({id(a.buffer) for a in used}) != len(used):  # WgpuBuffer hashes by identity
        raise RumusError(f"{entry}_step: parameter, gradient, state and step tensors must not share memory")
    dtype = param.dtype
    offsets = tuple([0 if a is None else a.offset for a in args] + [0] * (_SLOTS + 1 - len(args)))
    # program, grid and the integer header depend only on these (cached per device); the constants
    # (learning rate, bias corrections) change every step and are packed per call
    key = ("optim", entry, dtype, n, offsets, flags)
    hit = dev.launch_plans.get(key)
    if hit is None:
        prog = dev.programs.get(("optim", entry, dtype.name), lambda: render("optim", scalar=wgsl_scalar(dtype)),
                                entry_point=entry)
        x, y, z = grid((n + WG - 1) // WG, dev.max_groups)
        hit = (prog, (x, y, z), struct.pack("<4I8I", n, x * WG, flags, 0, *offsets))
        remember(dev.launch_plans, key, hit)
    prog, groups, header = hit
    spare = iter(_dummies(dev, _SLOTS))
    buffers = [next(spare) if a is None else a.buffer for a in args]
    buffers += [next(spare) for _ in range(_SLOTS - len(buffers))]
    data = header + struct.pack("<12f", *consts, *([0.0] * (12 - len(consts))))
    dev.recorder.dispatch(prog, buffers, data, groups)


def _log(beta: float) -> float:
    """log(beta) for the shader's 1 - exp(t * log(beta)); beta = 0 (no moment) gives 1 - exp(-huge) = 1."""
    return math.log(beta) if beta > 0 else -1e30


def adam_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    lr, b1, b2 = float(attrs["lr"]), float(attrs["beta1"]), float(attrs["beta2"])
    wd, step = float(attrs.get("weight_decay", 0.0)), int(attrs.get("step", 1))
    decoupled = bool(attrs.get("decoupled", False))
    bc1, bc2 = 1.0 - b1 ** step, 1.0 - b2 ** step
    coupled = 1 if wd and not decoupled else 0
    decay = 1.0 - lr * wd if wd and decoupled else 1.0
    _dispatch("adam", inputs, coupled, [lr / bc1, b1, 1.0 - b1, float(attrs["eps"]),
                                        wd, decay, 1.0 / math.sqrt(bc2), b2, 1.0 - b2])


def adam_step_dev_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """param, grad, exp_avg, exp_avg_sq, [max_exp_avg_sq], step, found_inf: the shader reads the count and the
    flag, so nothing here depends on their values (a recorded dispatch, no read-back)."""
    p, g, m, v, *vmax, step, flag = inputs
    lr, b1, b2, wd = float(attrs["lr"]), float(attrs["beta1"]), float(attrs["beta2"]), float(attrs["weight_decay"])
    decoupled = bool(attrs["decoupled"])
    flags = (_DEVICE_STEP | (1 if wd and not decoupled else 0) | (2 if attrs["maximize"] else 0)
             | (4 if vmax else 0))
    decay = 1.0 - lr * wd if wd and decoupled else 1.0
    _dispatch("adam", [p, g, m, v, vmax[0] if vmax else None, step, flag], flags,
              [lr, b1, 1.0 - b1, float(attrs["eps"]), wd, decay, 1.0, b2, 1.0 - b2, _log(b1), _log(b2)])


def sgd_step(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    momentum = float(attrs.get("momentum", 0.0))
    flags = (1 if momentum else 0) | (2 if attrs.get("nesterov") else 0) | (4 if attrs.get("first", True) else 0)
    _dispatch("sgd", inputs, flags, [float(attrs["lr"]), momentum, 1.0 - float(attrs.get("dampening", 0.0)),
                                     float(attrs.get("weight_decay", 0.0))])


_MAX_COUNTS = 32  # counts per dispatch at most (their offsets fill the uniform)


def _count_source(k: int) -> str:
    bindings = "\n".join(f"@group(0) @binding({j}) var<storage, read_write> c{j}: array<f32>;" for j in range(k))
    adds = "\n".join(f"    c{j}[cfg.offsets[{j // 4}][{j % 4}]] += 1.0;" for j in range(k))
    return render("adam_step_count", K=str(k), K1=str(k + 1), K4=str((k + 3) // 4), BINDINGS=bindings, ADDS=adds)


def adam_step_count_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """steps[0..n), found_inf: one single-invocation dispatch per group of as many counts as the device binds
    (a new group where two counts share a buffer)."""
    *steps, flag = inputs
    if not steps:
        return
    dev = device_of([], inputs)
    if id(flag.buffer) in {id(s.buffer) for s in steps}:
        raise RumusError("adam_step_count_: the step counts and found_inf must not share memory")
    size = min(_MAX_COUNTS, dev.limits.get("max-storage-buffers-per-shader-stage", 8) - 1)
    for group in _groups(steps, size):
        k = len(group)
        key = ("adam_step_count", flag.offset, *(s.offset for s in group))
        hit = dev.launch_plans.get(key)
        if hit is None:
            prog = dev.programs.get(("adam_step_count", k), partial(_count_source, k), uniform_size=16 + 16 * k)
            offsets = [s.offset for s in group] + [0] * (-k % 4)
            hit = (prog, struct.pack(f"<4I{len(offsets)}I", flag.offset, 0, 0, 0, *offsets))
            remember(dev.launch_plans, key, hit)
        prog, uniform = hit
        dev.recorder.dispatch(prog, [*(s.buffer for s in group), flag.buffer], uniform, (1, 1, 1))


def kernels() -> dict[str, Any]:
    return {"adam_step": adam_step, "adam_step_dev_": adam_step_dev_, "adam_step_count_": adam_step_count_,
            "sgd_step": sgd_step}
