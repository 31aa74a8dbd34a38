"""conv2d forward for small weights as an implicit GEMM (shaders/nn_conv_implicit.wgsl): one dispatch
that gathers the im2col column tile by tile in workgroup memory and writes NCHW directly.

Why: with a small weight (few output channels, or few kernel entries) the im2col path is three
dispatches, a column buffer of C/g*kh*kw rows per output position written and read once, and a
reorder copy for small images, around a GEMM whose M (= output channels) is too small for its big
tiles anyway. Here the column never leaves the workgroup.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import TensorArg
from .nn_common import pack
from .nn_conv_wgrad import small_weight
from .pipelines import render, wgsl_scalar

POSITIONS, CHANNELS = 64, 16   # a workgroup's tile: output positions x output channels


def suits(dev: Any, cv: Any) -> bool:
    """Small weights (nn_conv_wgrad.small_weight) whose tiles fit one grid dimension."""
    tiles = -(-cv.n * cv.L // POSITIONS) * -(-cv.og // CHANNELS)
    return small_weight(cv) and tiles <= int(dev.max_groups)


def forward(dev: Any, cv: Any, y: TensorArg, x: TensorArg, w: TensorArg) -> None:
    """y = conv2d(x, w) for the geometry `cv` (nn_conv._Conv)."""
    rows = cv.n * cv.L
    tiles_p = -(-rows // POSITIONS)
    tiles = tiles_p * -(-cv.og // CHANNELS)
    prog = dev.programs.get(("nn", "nn_conv_implicit", "forward", x.dtype.name, ()),
                            lambda: render("nn_conv_implicit", wgsl_scalar(x.dtype)))
    for g0 in range(0, cv.g, int(dev.max_groups)):
        words = [*cv.geo, cv.o, cv.og, cv.k // (cv.kh * cv.kw), cv.k, rows, tiles_p, g0, x.offset, w.offset,
                 y.offset, 0]
        dev.recorder.dispatch(prog, [y.buffer, x.buffer, w.buffer], pack(words),
                              (tiles, min(int(dev.max_groups), cv.g - g0), 1))
