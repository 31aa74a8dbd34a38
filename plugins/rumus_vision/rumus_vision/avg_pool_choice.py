"""When the row-wise avg_pool2d kernels (csrc/vision_avg_pool_impl.inc) run instead of the core's per-window
kernels: the predicate registered with them and the conformance samples it accepts.

Both compute every window directly (no column buffer); the row-wise kernels sum kh*kw shifted input rows with
a vectorisable loop over the output width, where the core's kernel walks one window at a time with a double
accumulator. The predicate takes the shapes where the row loop has work to vectorise: see AVG_MIN_OUTPUT_WIDTH.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import Sample
from rumus_contracts.ops.nn_pool import avg_pool_backward_samples, avg_pool_samples, pool_out_size

# Measured on 2 shared cores, float32 (noisy): at [8,64,56,56] the rows win 2-3x forward (2x2/s2, 3x3/s1/p1,
# 3x3/s2/p1) and 1.2-1.7x backward; at output width 8 they are even to 1.7x faster; at widths 1-4 (the 7x7 global
# pool of [64,256,7,7], 2x2 pools of 4x4 and 8x8 maps) the core's kernel is as fast or up to 5x faster.
AVG_MIN_OUTPUT_WIDTH = 8


def _output_width(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any], backward: bool) -> int:
    if backward:
        return int(shapes[0][3])
    kw, sw, pw = int(attrs["kernel_size"][1]), int(attrs["stride"][1]), int(attrs["padding"][1])
    return int(pool_out_size(int(shapes[0][3]), kw, sw, pw, 1, bool(attrs["ceil_mode"])))


def avg_applies(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> bool:
    """avg_pool2d: output rows at least AVG_MIN_OUTPUT_WIDTH wide."""
    return _output_width(shapes, attrs, False) >= AVG_MIN_OUTPUT_WIDTH


def avg_backward_applies(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> bool:
    """avg_pool2d_backward (shapes[0] is the pooled grad): output rows at least AVG_MIN_OUTPUT_WIDTH wide."""
    return _output_width(shapes, attrs, True) >= AVG_MIN_OUTPUT_WIDTH


# (x shape, attrs): every one has output rows >= AVG_MIN_OUTPUT_WIDTH wide; padding, ceil mode (a window
# clipped by the padded edge), count_include_pad, divisor_override, non-square, height 1, an empty batch
AVG_CASES: tuple[tuple[tuple[int, ...], dict[str, Any]], ...] = (
    ((2, 3, 8, 16), {}),
    ((2, 2, 9, 17), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ((2, 2, 9, 17), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False}),
    ((1, 2, 6, 15), {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    ((1, 2, 6, 15), {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True,
                     "count_include_pad": False}),
    ((2, 1, 5, 10), {"kernel_size": (2, 3), "stride": (1, 1), "divisor_override": 4}),
    ((3, 2, 1, 16), {"kernel_size": (1, 2), "stride": (1, 2)}),
    ((1, 2, 7, 8), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
    ((0, 2, 8, 16), {}),
)


def avg_samples(rng: np.random.Generator) -> list[Sample]:
    return avg_pool_samples(rng, AVG_CASES, "rows ")


def avg_backward_samples(rng: np.random.Generator) -> list[Sample]:
    return avg_pool_backward_samples(rng, AVG_CASES, "rows ")
