"""When the direct convolution runs instead of the core's im2col + GEMM: the predicate registered with the
kernels (rumus_contracts.KernelRegistry's `applies`), the mode that overrides it, and the conformance
samples the predicate accepts.

Measured on 2 shared cores (plugins/rumus_vision/benchmarks/conv_shapes.py, batch 8, 3x3 and 5x5): the
direct kernels win 1.2-2.9x on depthwise and narrow grouped convs, one or two input channels and one or two
outputs per group (the im2col GEMM there is a stack of tiny, memory-bound products); they lose from 4
channels per group, 3-30x on dense convs (the 3-channel ResNet stem included), where BLAS's register-tiled
GEMM is hard to beat, and they also lose where one or two input channels feed many outputs per group: a
grayscale stem (64x1x28x28 -> 16, the MNIST CNN's first layer) 0.6x forward and 0.1-0.2x in its gradients,
channel multipliers of 4-8 0.4-0.9x (the GEMM is then [outputs x 9] @ [9 x pixels], which BLAS does well).
So "auto" picks direct for at most DIRECT_MAX_GROUP_CHANNELS input channels and DIRECT_MAX_GROUP_OUTPUTS
outputs per group on the CPU; the WGSL kernels keep the input-channel rule alone (their outputs-per-group
cost was not re-measured). The mode "direct" forces it for every conv (it needs no column buffer), and "im2col"
turns it off.

max_pool2d (cpu, forward): the row-wise kernel wins 3-6x when windows reach into the padding (the core's
kernel then takes its per-window path), and loses to the core's 2x2 fast path, so it takes padded
windows only (the conv mode does not apply to it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from rumus_contracts import Sample, config
from rumus_contracts.ops.nn_conv import conv_output_shape
from rumus_contracts.ops.nn_pool import MAX_ATTRS

DIRECT_MAX_GROUP_CHANNELS = 2
DIRECT_MAX_GROUP_OUTPUTS = 2
MODES = ("auto", "direct", "im2col")
config.declare("RUMUS_VISION_CONV", "choice", "auto", "convolutions: direct kernels where they win (auto), always "
               "direct, or always im2col + GEMM", owner="rumus-vision", choices=MODES)
_mode: str = config.text("RUMUS_VISION_CONV")  # read once, at plugin load; set_conv_mode changes it later


def conv_mode() -> str:
    return _mode


def set_conv_mode(mode: str) -> None:
    """'auto' (direct where it wins), 'direct' (every conv), 'im2col' (never); also RUMUS_VISION_CONV."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"conv mode {mode!r}: expected one of {', '.join(MODES)}")
    _mode = mode


@contextmanager
def conv_mode_as(mode: str) -> Iterator[None]:
    previous = _mode
    set_conv_mode(mode)
    try:
        yield
    finally:
        set_conv_mode(previous)


def _group_channels(op: str, shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> int:
    """Input channels per group: the weight's dim 1, or x's channels / groups for the weight gradient."""
    if op == "conv2d_backward_weight":
        return shapes[1][1] // max(int(attrs["groups"]), 1)
    return shapes[1][1]


def _group_outputs(op: str, shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> int:
    """Output channels per group: the weight's dim 0, or the gradient's channels for the weight gradient."""
    groups = max(int(attrs["groups"]), 1)
    return (shapes[0][1] if op == "conv2d_backward_weight" else shapes[1][0]) // groups


def predicate(op: str, max_outputs: int | None = None) -> Any:
    """applies(shapes, attrs) for one of the three conv ops; max_outputs: the most output channels per group
    the direct kernel takes in "auto" mode (None: any number)."""
    def applies(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> bool:
        if _mode != "auto":
            return _mode == "direct"
        return (_group_channels(op, shapes, attrs) <= DIRECT_MAX_GROUP_CHANNELS
                and (max_outputs is None or _group_outputs(op, shapes, attrs) <= max_outputs))
    applies.__qualname__ = f"direct_{op}_applies"
    return applies


# (x shape, weight shape, stride, padding, dilation, groups): every one has <= 2 input channels per group
CASES: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, int], tuple[int, int], tuple[int, int], int], ...] = (
    ((2, 4, 7, 6), (4, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),     # depthwise
    ((2, 6, 9, 8), (6, 1, 3, 3), (2, 2), (1, 1), (1, 1), 6),     # depthwise, stride 2
    ((1, 4, 8, 9), (8, 2, 3, 2), (1, 2), (2, 1), (2, 1), 2),     # grouped, dilated, non-square kernel
    ((2, 3, 5, 5), (6, 1, 5, 5), (1, 1), (2, 2), (1, 1), 3),     # channel multiplier 2, 5x5
    ((2, 1, 6, 7), (5, 1, 3, 3), (3, 2), (0, 1), (1, 1), 1),     # one input channel, 5 outputs (a partial block)
    ((3, 2, 1, 4), (2, 1, 1, 3), (1, 1), (0, 1), (1, 1), 2),     # height 1
    ((2, 8, 6, 6), (8, 2, 3, 3), (1, 1), (1, 1), (1, 1), 4),     # 2 channels per group: the threshold
    ((0, 4, 5, 5), (4, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),     # empty batch
    # the two above with more than 2 outputs per group again, within the CPU's rule (it declines those)
    ((1, 4, 8, 9), (4, 2, 3, 2), (1, 2), (2, 1), (2, 1), 2),     # grouped, dilated, non-square, 2 outputs per group
    ((2, 1, 6, 7), (2, 1, 3, 3), (3, 2), (0, 1), (1, 1), 1),     # one input channel, 2 outputs, strides 3 and 2
)


def _attrs(s: tuple[int, int], p: tuple[int, int], d: tuple[int, int], g: int) -> dict[str, Any]:
    return {"stride": s, "padding": p, "dilation": d, "groups": g}


def samples(op: str) -> Any:
    """The conformance samples of the direct kernel for `op` (inputs in the op's order)."""
    def gen(rng: np.random.Generator) -> list[Sample]:
        out = []
        for xs, ws, s, p, d, g in CASES:
            a = _attrs(s, p, d, g)
            name = f"direct x{xs} w{ws} {a}"
            gs = conv_output_shape("conv2d", xs, ws, a)
            if op == "conv2d":
                out.append(Sample([rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)], a, name=name))
            elif op == "conv2d_backward_input":
                out.append(Sample([rng.uniform(-1, 1, gs), rng.uniform(-1, 1, ws)], {**a, "input_size": xs[2:]},
                                  name=name))
            else:
                out.append(Sample([rng.uniform(-1, 1, gs), rng.uniform(-1, 1, xs)], {**a, "kernel_size": ws[2:]},
                                  name=name))
        return out
    return gen


def pool_applies(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> bool:
    """max_pool2d: padded windows (the ResNet stem's 3x3 / stride 2 / padding 1)."""
    return any(int(p) > 0 for p in attrs["padding"])


# (x shape, attrs): padded windows, with strides, dilation, ceil mode, non-square, size-1 and size-0 dims
POOL_CASES: tuple[tuple[tuple[int, ...], dict[str, Any]], ...] = (
    ((2, 3, 9, 8), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ((1, 2, 7, 10), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
    ((2, 2, 7, 5), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    ((1, 2, 9, 8), {"kernel_size": (3, 2), "stride": (2, 3), "padding": (1, 0), "dilation": (2, 1)}),
    ((2, 1, 1, 6), {"kernel_size": (1, 3), "stride": (1, 2), "padding": (0, 1)}),
    ((0, 2, 4, 4), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
)


def pool_samples(rng: np.random.Generator) -> list[Sample]:
    """Distinct values (one maximum per window, as the core's samples), so gradient checks are defined."""
    out = []
    for shape, a in POOL_CASES:
        n = int(np.prod(shape))
        x = (rng.permutation(n).astype(np.float64) / 4.0 - n / 8.0).reshape(shape)
        out.append(Sample([x], {**MAX_ATTRS, **a}, name=f"rows {shape} {a}"))
    return out
