"""Direct convolution vs the core's im2col + GEMM, per conv shape and op, on one backend: the numbers behind
rumus_vision.choice (which shapes the direct kernels take in "auto" mode).

    python plugins/rumus_vision/benchmarks/conv_shapes.py                 # cpu
    RUMUS_BACKEND=wgpu python plugins/rumus_vision/benchmarks/conv_shapes.py --reps 10

Each row: milliseconds per call (median of --reps, the host synchronised after each call) of the forward,
the input gradient and the weight gradient, im2col then direct, and direct's speed-up per op; the last
column says what "auto" mode picks.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import rumus as rm
from rumus import backend_api as api
from rumus_vision import conv_mode_as
from rumus_vision.choice import DIRECT_MAX_GROUP_OUTPUTS, predicate

# (batch, channels, height=width, out channels, kernel, stride, groups)
SHAPES = [
    (8, 64, 56, 64, 3, 1, 64), (8, 128, 28, 128, 3, 1, 128), (8, 256, 14, 256, 3, 2, 256),
    (8, 96, 56, 96, 5, 1, 96), (8, 64, 56, 64, 3, 1, 32), (8, 64, 56, 64, 3, 1, 16), (8, 64, 56, 64, 3, 1, 8),
    (8, 64, 56, 64, 3, 1, 1), (8, 3, 112, 64, 7, 2, 1), (8, 256, 14, 256, 3, 1, 1), (8, 64, 56, 64, 1, 1, 1),
    # one or two input channels per group with more outputs per group (channel multipliers, a grayscale stem)
    (64, 1, 28, 16, 3, 1, 1), (8, 1, 112, 32, 3, 1, 1), (8, 2, 56, 64, 3, 1, 1), (8, 64, 56, 128, 3, 1, 64),
    (8, 32, 56, 128, 3, 1, 32), (8, 16, 56, 128, 3, 1, 16), (8, 32, 56, 64, 3, 1, 16),
]


def _time(fn: Callable[[], rm.Tensor], reps: int) -> float:
    fn().numpy()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn().numpy()  # read back: the wgpu backend records work and runs it at the host read
        out.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(out))


def _calls(x: rm.Tensor, w: rm.Tensor, attrs: dict[str, Any]) -> list[Callable[[], rm.Tensor]]:
    """forward, input gradient, weight gradient of one convolution."""
    y = rm.ops.conv2d(x, w, **attrs)
    return [lambda: rm.ops.conv2d(x, w, **attrs),
            lambda: rm.ops.conv2d_backward_input(y, w, input_size=x.shape[2:], **attrs),
            lambda: rm.ops.conv2d_backward_weight(y, x, kernel_size=w.shape[2:], **attrs)]


def _compare(fn: Callable[[], rm.Tensor], reps: int) -> str:
    with conv_mode_as("im2col"):
        t_i = _time(fn, reps)
    with conv_mode_as("direct"):
        t_d = _time(fn, reps)
    return f"{t_i:8.1f} /{t_d:8.1f} x{t_i / t_d:4.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--from-row", type=int, default=0, help="start at this row of SHAPES")
    a = ap.parse_args()
    dev = rm.default_device()
    print(f"device {dev}; ms per call (im2col / direct, speed-up)")
    print(f"{'N,C,HW,O,k,s,g':22} {'forward':>22} {'grad input':>22} {'grad weight':>22}  auto")
    rng = np.random.default_rng(0)
    for n, c, hw, o, k, s, g in SHAPES[a.from_row:]:
        x = rm.tensor(rng.standard_normal((n, c, hw, hw)).astype(np.float32), device=dev)
        w = rm.tensor(rng.standard_normal((o, c // g, k, k)).astype(np.float32), device=dev)
        attrs = {"stride": (s, s), "padding": (k // 2, k // 2), "dilation": (1, 1), "groups": g}
        cells = [_compare(fn, a.reps) for fn in _calls(x, w, attrs)]
        applies = predicate("conv2d", DIRECT_MAX_GROUP_OUTPUTS if dev.backend == "cpu" else None)
        auto = "direct" if applies([x.shape, w.shape], api.op_schema("conv2d").bind_attrs(attrs)) else "im2col"
        print(f"{f'{n},{c},{hw},{o},{k},{s},{g}':22} {'  '.join(cells)}  {auto}", flush=True)


if __name__ == "__main__":
    main()
