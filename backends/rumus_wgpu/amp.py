"""The loss scaler's ops on the GPU (shaders/amp.wgsl): recorded like every kernel, never read back."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg

from .layout import WG, device_of, grid, remember
from .pipelines import render


def _launch(entry: str, args: Sequence[TensorArg], n: int, interval: int = 0, growth: float = 0.0,
            backoff: float = 0.0) -> None:
    dev = device_of([], args)
    buffers = [a.buffer for a in args]
    if len(set(buffers)) != len(args):  # one buffer bound twice read-write is refused by WebGPU
        raise RumusError(f"amp_{entry}_: the gradient and the scaler's state tensors must not share memory")
    key = ("amp", entry, n, tuple(a.offset for a in args))
    hit = dev.launch_plans.get(key)
    if hit is None:
        prog = dev.programs.get(("amp", entry), lambda: render("amp"), entry_point=entry)
        x, y, z = grid((n + WG - 1) // WG, dev.max_groups) if entry == "unscale_check" else (1, 1, 1)
        hit = (prog, (x, y, z), struct.pack("<5I", n, x * WG, *(a.offset for a in args)))
        remember(dev.launch_plans, key, hit)
    prog, groups, header = hit
    dev.recorder.dispatch(prog, buffers, header + struct.pack("<I2f", interval, growth, backoff), groups)


def amp_unscale_check_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    if inputs[0].numel:
        _launch("unscale_check", inputs, inputs[0].numel)


def amp_update_scale_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _launch("update_scale", inputs, 1, int(attrs["growth_interval"]), float(attrs["growth_factor"]),
            float(attrs["backoff_factor"]))


def kernels() -> dict[str, Any]:
    return {"amp_unscale_check_": amp_unscale_check_, "amp_update_scale_": amp_update_scale_}
