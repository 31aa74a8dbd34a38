"""The plugin's pooling kernels vs the core's, per shape, on one backend: the numbers behind
rumus_vision.avg_pool_choice (cpu: row-wise avg_pool2d forward and backward) and rumus_vision.pool_wgpu (wgpu:
one-pass max/avg_pool2d_backward for non-overlapping windows).

    python plugins/rumus_vision/benchmarks/pool_shapes.py                        # cpu
    RUMUS_BACKEND=wgpu python plugins/rumus_vision/benchmarks/pool_shapes.py

Each row: milliseconds per call (best of --reps, the host synchronised by reading the output back after each
call), core then plugin, and whether the plugin's predicate takes the shape (on wgpu the plugin's shaders are timed
only where it does: they are correct for non-overlapping windows only).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import rumus as rm
from rumus import backend_api as api
from rumus_contracts.ops.nn_pool import AVG_ATTRS, MAX_ATTRS, pool_output_shape

# (x shape, attrs)
SHAPES: list[tuple[tuple[int, ...], dict[str, Any]]] = [
    ((8, 64, 56, 56), {"kernel_size": (2, 2), "stride": (2, 2)}),
    ((8, 64, 56, 56), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ((8, 64, 56, 56), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
    ((8, 32, 64, 64), {"kernel_size": (3, 3), "stride": (3, 3), "padding": (1, 1)}),
    ((64, 256, 16, 16), {"kernel_size": (2, 2), "stride": (2, 2)}),
    ((64, 256, 8, 8), {"kernel_size": (2, 2), "stride": (2, 2)}),
    ((64, 256, 7, 7), {"kernel_size": (7, 7), "stride": (7, 7)}),
]
OPS = {"cpu": ("avg_pool2d", "avg_pool2d_backward"), "wgpu": ("max_pool2d_backward", "avg_pool2d_backward")}


def _best(kernel: Any, out: rm.Tensor, ins: list[Any], attrs: dict[str, Any], reps: int) -> float:
    kernel([out._arg], ins, attrs)
    out.numpy()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        kernel([out._arg], ins, attrs)
        out.numpy()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    dev = rm.default_device()
    rng = np.random.default_rng(0)
    for op in OPS[dev.backend]:
        chooser = api.kernel(op, api.backend(dev.backend), rm.float32)
        plugin = chooser.choices[0][1]
        for shape, a in SHAPES:
            attrs = {**(MAX_ATTRS if op.startswith("max") else AVG_ATTRS), **a}
            pooled = pool_output_shape(op, shape, attrs)
            x = rm.tensor(rng.permutation(int(np.prod(shape))).reshape(shape), dtype="float32", device=dev)
            g = rm.tensor(rng.uniform(-1, 1, pooled), dtype="float32", device=dev)
            if op == "avg_pool2d":
                out, ins, at = rm.empty(pooled, dtype="float32", device=dev), [x._arg], attrs
            elif op == "avg_pool2d_backward":
                out, ins, at = rm.empty(shape, dtype="float32", device=dev), [g._arg], {**attrs,
                                                                                       "input_size": shape[2:]}
            else:
                out, ins, at = rm.empty(shape, dtype="float32", device=dev), [g._arg, x._arg], attrs
            taken = chooser.pick(ins, at) is plugin
            core = _best(chooser.fallback, out, ins, at, args.reps)
            if not taken and dev.backend == "wgpu":  # the one-pass shaders are wrong for overlapping windows
                print(f"{op:20s} {str(shape):18s} {str(a):62s} core {core:8.2f} ms  (plugin declines: overlapping)")
                continue
            mine = _best(plugin, out, ins, at, args.reps)
            print(f"{op:20s} {str(shape):18s} {str(a):62s} core {core:8.2f} ms  plugin {mine:8.2f} ms  "
                  f"x{core / mine:5.2f}  {'taken' if taken else 'core'}")


if __name__ == "__main__":
    main()
