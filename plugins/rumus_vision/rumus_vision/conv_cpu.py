"""CPU kernels of the direct convolution (csrc/vision_conv.c): conv2d and its two backward ops, no im2col
buffer. The core's schemas make x, weight and grad contiguous before a kernel runs, so only offsets matter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import TensorArg

from ._kernels import ffi, lib

_SFX = {"float32": "f32", "float64": "f64"}


def _fns(name: str) -> dict[str, Any]:
    return {dt: getattr(lib, f"rv_{name}_{sfx}") for dt, sfx in _SFX.items()}


_FORWARD, _GRAD_INPUT, _GRAD_WEIGHT = _fns("conv2d"), _fns("conv2d_backward_input"), _fns("conv2d_backward_weight")


def _ptr(arg: TensorArg) -> Any:
    return ffi.from_buffer(arg.buffer) + arg.offset * arg.buffer.itemsize


def _geometry(x: Sequence[int], w: Sequence[int], y: Sequence[int], attrs: Mapping[str, Any]) -> Any:
    """[N, C, H, W, O, groups, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo] as csrc/vision_conv.c reads it."""
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    return ffi.new("int64_t[]", [x[0], x[1], x[2], x[3], w[0], int(attrs["groups"]), w[2], w[3], sh, sw, ph, pw,
                                 dh, dw, y[2], y[3]])


def conv2d(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, (x, w) = outputs[0], inputs
    if y.numel:
        _FORWARD[x.dtype.name](_ptr(x), _ptr(w), _ptr(y), _geometry(x.shape, w.shape, y.shape, attrs))


def conv2d_backward_input(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gx, (gy, w) = outputs[0], inputs
    if gx.numel:
        _GRAD_INPUT[gy.dtype.name](_ptr(gy), _ptr(w), _ptr(gx), _geometry(gx.shape, w.shape, gy.shape, attrs))


def conv2d_backward_weight(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gw, (gy, x) = outputs[0], inputs
    if gw.numel:
        _GRAD_WEIGHT[x.dtype.name](_ptr(gy), _ptr(x), _ptr(gw), _geometry(x.shape, gw.shape, gy.shape, attrs))
