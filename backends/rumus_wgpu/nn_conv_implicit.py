"""conv2d and conv2d_backward_input for small weights as implicit GEMMs (shaders/nn_conv_implicit.wgsl):
one dispatch each, which gathers the im2col column tile by tile in workgroup memory and writes NCHW.

Why: with a small weight (few output channels, or few kernel entries) the im2col path is three
dispatches, a column buffer of C/g*kh*kw rows per position written and read once (col2im's for the
input gradient), and reorder copies for small images, around a GEMM whose M or K is too small for its
big tiles anyway. Here the column never leaves the workgroup.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import TensorArg

from .nn_common import pack, source
from .conv_config import config_words
from .nn_conv_wgrad import small_weight

POSITIONS, ROWS = 64, 16   # a workgroup's tile: output positions x output channels


def _tiles(positions: int, rows: int) -> tuple[int, int]:
    """(tiles along positions, all tiles of one group)."""
    tiles_p = -(-positions // POSITIONS)
    return tiles_p, tiles_p * -(-rows // ROWS)


def suits(dev: Any, cv: Any, input_grad: bool = False) -> bool:
    """Small weights (nn_conv_wgrad.small_weight) whose tiles of one group fit one grid dimension."""
    positions, rows = (cv.n * cv.h * cv.w, cv.k // (cv.kh * cv.kw)) if input_grad else (cv.n * cv.L, cv.og)
    return small_weight(cv) and _tiles(positions, rows)[1] <= int(dev.max_groups)


def _run(dev: Any, cv: Any, section: str, out: TensorArg, image: TensorArg, w: TensorArg) -> None:
    """out = the implicit GEMM of `section` ("forward": conv2d; "input": conv2d_backward_input)."""
    cg, taps = cv.k // (cv.kh * cv.kw), cv.kh * cv.kw
    if section == "forward":
        m, kred, out_ch, out_h, out_w = cv.og, cv.k, cv.o, cv.ho, cv.wo
    else:
        m, kred, out_ch, out_h, out_w = cg, cv.og * taps, cv.c, cv.h, cv.w
    rows = cv.n * out_h * out_w
    tiles_p, tiles = _tiles(rows, m)
    include = ("exact_div", "conv_config")
    prog = dev.programs.get(("nn", "nn_conv_implicit", section, image.dtype.name, include),
                            lambda: source("nn_conv_implicit", section, image.dtype, include))
    for g0 in range(0, cv.g, int(dev.max_groups)):
        words = config_words(cv, m=m, kred=kred, out_ch=out_ch, out_h=out_h, out_w=out_w, rows=rows, tiles=tiles_p,
                             g0=g0, a_off=image.offset, b_off=w.offset, out_off=out.offset)
        dev.recorder.dispatch(prog, [out.buffer, image.buffer, w.buffer], pack([0, 0, *words]),
                              (tiles, min(int(dev.max_groups), cv.g - g0), 1))


def forward(dev: Any, cv: Any, y: TensorArg, x: TensorArg, w: TensorArg) -> None:
    """y = conv2d(x, w) for the geometry `cv` (nn_conv._Conv)."""
    _run(dev, cv, "forward", y, x, w)


def backward_input(dev: Any, cv: Any, gx: TensorArg, gy: TensorArg, w: TensorArg) -> None:
    """gx = conv2d_backward_input(gy, w) for the geometry `cv`."""
    _run(dev, cv, "input", gx, gy, w)
