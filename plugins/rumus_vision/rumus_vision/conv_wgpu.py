"""WebGPU kernels of the direct convolution (shaders/conv_direct.wgsl) as ShaderKernels, float32.

forward and backward_input run one invocation per output element; backward_weight `lanes` invocations per
weight element (a power of two up to 256, about one per PRODUCTS_PER_LANE of the N*Ho*Wo products), which
reduce their parts in a fixed order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from rumus_contracts import ShaderKernel, TensorArg

MAX_GROUPS = 65535  # WebGPU's per-dimension dispatch limit
PRODUCTS_PER_LANE = 16


def _grid(groups: int) -> tuple[int, int, int]:
    groups = max(1, groups)
    return (min(groups, MAX_GROUPS), -(-groups // MAX_GROUPS), 1)


def _geometry(x: Sequence[int], w: Sequence[int], y: Sequence[int], attrs: Mapping[str, Any]) -> list[int]:
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    return [x[0], x[1], x[2], x[3], w[0], int(attrs["groups"]), w[2], w[3], sh, sw, ph, pw, dh, dw, y[2], y[3]]


def _lanes(gy_shape: Sequence[int]) -> int:
    """Invocations per weight element: the power of two nearest below N*Ho*Wo / PRODUCTS_PER_LANE, 1..256."""
    work = gy_shape[0] * gy_shape[2] * gy_shape[3] // PRODUCTS_PER_LANE
    return 1 << min(8, max(work, 1).bit_length() - 1)


def _forward_params(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> list[int | float]:
    y, (x, w) = outs[0], ins
    return [*_geometry(x.shape, w.shape, y.shape, attrs), y.offset, x.offset, w.offset, y.numel, 1]


def _input_params(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> list[int | float]:
    gx, (gy, w) = outs[0], ins
    return [*_geometry(gx.shape, w.shape, gy.shape, attrs), gx.offset, gy.offset, w.offset, gx.numel, 1]


def _weight_params(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> list[int | float]:
    gw, (gy, x) = outs[0], ins
    return [*_geometry(x.shape, gw.shape, gy.shape, attrs), gw.offset, gy.offset, x.offset, gw.numel,
            _lanes(gy.shape)]


def _per_element(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> tuple[int, int, int]:
    return _grid(-(-outs[0].numel // 256))


def _per_weight(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> tuple[int, int, int]:
    return _grid(-(-outs[0].numel // (256 // _lanes(ins[0].shape))))


def shader_kernels() -> dict[str, ShaderKernel]:
    """op name -> ShaderKernel (built at kernel registration, compiled by the backend on first use)."""
    source = files("rumus_vision.shaders").joinpath("conv_direct.wgsl").read_text()
    return {
        "conv2d": ShaderKernel("wgsl", source, "forward", _per_element, _forward_params),
        "conv2d_backward_input": ShaderKernel("wgsl", source, "backward_input", _per_element, _input_params),
        "conv2d_backward_weight": ShaderKernel("wgsl", source, "backward_weight", _per_weight, _weight_params),
    }
