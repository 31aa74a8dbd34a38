"""The loss scaler's ops on the GPU (shaders/amp.wgsl, shaders/amp_multi.wgsl): recorded like every kernel,
never read back."""

from __future__ import annotations

import struct
from functools import partial
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg, bfloat16, float16, float32

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


_KIND = {float32: 0, float16: 1, bfloat16: 2}  # shaders/amp_multi.wgsl's gradient kinds
_MAX_GROUP = 32  # gradients per dispatch at most (the uniform holds 16 bytes per gradient)


def _groups(grads: Sequence[TensorArg], size: int) -> list[list[TensorArg]]:
    """Up to `size` gradients per dispatch, a new group where a buffer would be bound twice (views of
    one buffer: separate dispatches are ordered, and 16-bit words at their edges never race)."""
    out: list[list[TensorArg]] = []
    seen: set[int] = set()
    for g in grads:
        if not out or len(out[-1]) == size or id(g.buffer) in seen:
            out.append([])
            seen = set()
        out[-1].append(g)
        seen.add(id(g.buffer))
    return out


def _multi_source(k: int) -> str:
    bindings = "\n".join(f"@group(0) @binding({j}) var<storage, read_write> g{j}: array<u32>;" for j in range(k))
    cases = "\n".join(f"        case {j}u: {{ r = unscale_word(g{j}[w], w, {j}u, s); g{j}[w] = r.x; }}"
                       for j in range(k))
    return render("amp_multi", K=str(k), K1=str(k + 1), K2=str(k + 2), BINDINGS=bindings, CASES=cases)


def amp_unscale_check_multi_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                             attrs: Mapping[str, Any]) -> None:
    """grads[0..n), found_inf, inv_scale: one dispatch per group of as many gradients as the device binds
    (its storage-buffer limit less the flag and inv_scale), all OR-ing into the same flag."""
    *grads, flag, inv = inputs
    grads = [g for g in grads if g.numel]
    if not grads:
        return
    dev = device_of([], inputs)
    if {id(flag.buffer), id(inv.buffer)} & {id(g.buffer) for g in grads} or flag.buffer is inv.buffer:
        raise RumusError("amp_unscale_check_multi_: the gradients and the scaler's state tensors must not share "
                         "memory")
    size = min(_MAX_GROUP, dev.limits.get("max-storage-buffers-per-shader-stage", 8) - 2)
    for group in _groups(grads, size):
        key = ("amp_multi", flag.offset, inv.offset, *((g.offset, g.numel, _KIND[g.dtype]) for g in group))
        hit = dev.launch_plans.get(key)
        if hit is None:
            k = len(group)
            prog = dev.programs.get(("amp_multi", k), partial(_multi_source, k), uniform_size=16 + 16 * k)
            slots, start = [], 0
            for g in group:
                words = g.numel if g.dtype == float32 else (g.offset + g.numel + 1) // 2 - g.offset // 2
                slots.append(struct.pack("<4I", start, g.offset, g.numel, _KIND[g.dtype]))
                start += words
            x, y, z = grid((start + WG - 1) // WG, dev.max_groups)
            hit = (prog, (x, y, z), struct.pack("<4I", start, x * WG, flag.offset, inv.offset) + b"".join(slots))
            remember(dev.launch_plans, key, hit)
        prog, groups, uniform = hit
        dev.recorder.dispatch(prog, [*(g.buffer for g in group), flag.buffer, inv.buffer], uniform, groups)


def amp_update_scale_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _launch("update_scale", inputs, 1, int(attrs["growth_interval"]), float(attrs["growth_factor"]),
            float(attrs["backoff_factor"]))


def kernels() -> dict[str, Any]:
    return {"amp_unscale_check_": amp_unscale_check_, "amp_unscale_check_multi_": amp_unscale_check_multi_,
            "amp_update_scale_": amp_update_scale_}
