"""The loss scaler's ops (amp_unscale_check_, amp_unscale_check_multi_, amp_update_scale_): in place, C
(csrc/amp.c, csrc/amp_multi.c)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg, bfloat16, float16, float32

from ._lib import ffi, lib

_from_buffer = ffi.from_buffer


def amp_unscale_check_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """grad, found_inf, inv_scale (contiguous): grad *= inv_scale; found_inf = 1 on any inf/NaN."""
    g, flag, inv = inputs
    if g.numel == 0:
        return
    lib.rumus_amp_unscale_check_f32(_from_buffer(g.buffer), g.offset, g.numel, _from_buffer(flag.buffer),
                                    flag.offset, _from_buffer(inv.buffer), inv.offset)


_KIND = {float32: 0, float16: 1, bfloat16: 2}  # csrc/amp_multi.c's gradient kinds


def amp_unscale_check_multi_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                             attrs: Mapping[str, Any]) -> None:
    """grads[0..n), found_inf, inv_scale (contiguous; the op's list spelled out): one C call over them all."""
    *grads, flag, inv = inputs
    grads = [g for g in grads if g.numel]
    if grads:
        lib.rumus_amp_unscale_check_multi(
            len(grads), [_from_buffer(g.buffer) for g in grads], [g.offset for g in grads],
            [g.numel for g in grads], [_KIND[g.dtype] for g in grads], _from_buffer(flag.buffer), flag.offset,
            _from_buffer(inv.buffer), inv.offset)


def amp_update_scale_(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """scale, growth_tracker, found_inf (one element each): PyTorch's dynamic loss-scale update."""
    s, t, flag = inputs
    lib.rumus_amp_update_scale_f32(_from_buffer(s.buffer), s.offset, _from_buffer(t.buffer), t.offset,
                                   _from_buffer(flag.buffer), flag.offset, float(attrs["growth_factor"]),
                                   float(attrs["backoff_factor"]), int(attrs["growth_interval"]))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("amp_unscale_check_", amp_unscale_check_, (float32,)),
    ("amp_unscale_check_multi_", amp_unscale_check_multi_, (float32,)),
    ("amp_update_scale_", amp_update_scale_, (float32,)),
]
