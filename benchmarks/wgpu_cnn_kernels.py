"""GPU time per launch of each conv / pool kernel of the CNN step (benchmarks/nn_cnn.py), torch beside it:

    python3 benchmarks/wgpu_cnn_kernels.py --device wgpu:0 --torch-device cuda

A one-sync-per-kernel profile carries the ~0.25 ms of a wgpu sync in every row, and a batch timed while
it is recorded adds host time (the recorder submits at the sync or its batch bound). Here R launches are
recorded first into one pending batch (the recorder's bound lifted for it), then timed from the submit to
the end of the sync; batches of R and R/2 launches are timed and the difference, divided by R/2, is the
GPU time per launch with the submit + sync cost cancelled. "host ms" is the recording time per launch
(what an eager step pays; a compiled step replays its tape for about 0.40 ms in all). Torch runs the
same op on the same shapes (CUDA when available, else CPU) through the aten ops its autograd calls,
timed as launches between two syncs.
Rates: conv rows in GFLOP/s (2 * MACs), the others in GB/s (bytes read + written once).
With rumus-vision installed, convs with one or two input channels per group (conv1 here) run its direct
kernels instead of the backend's; the lent GPU machine's source-tree setup has no plugin.
Conv rows also time the im2col + GEMM path (RUMUS_WGPU_CONV_IM2COL=1, the path before the small-weight
kernels) in the column "im2col ms".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import cuda_torch_fp32, table  # noqa: E402

import rumus as rm  # noqa: E402
from rumus import ops  # noqa: E402
from rumus.nn import functional as F  # noqa: E402

CONV = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
IM2COL_ENV = "RUMUS_WGPU_CONV_IM2COL"  # backends/rumus_wgpu/nn_conv_wgrad.py: convs on im2col + GEMM
POOL = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), "ceil_mode": False}


@dataclass
class Row:
    name: str
    shape: str
    work: float            # flops (unit "GFLOP/s") or bytes (unit "GB/s") per launch
    unit: str
    rumus: Callable[[], object]
    torch: Callable[[], object]


def _rows(batch: int, device: Any, torch_device: str) -> list[Row]:
    """Every conv / pool / relu-backward / bias-sum kernel of the CNN step, at its shapes."""
    import torch
    aten = torch.ops.aten
    rng = np.random.default_rng(0)
    rows: list[Row] = []
    # (C_in, H, O) of the two conv blocks; the first conv's input needs no gradient, so no backward_input
    for layer, (c, h, o) in enumerate(((1, 28, 16), (16, 14, 32)), 1):
        n, w_ = batch, h
        arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in
                  (("x", (n, c, h, w_)), ("w", (o, c, 3, 3)), ("gy", (n, o, h, w_)), ("gp", (n, o, h // 2, w_ // 2)))}
        r = {k: rm.tensor(v, device=device) for k, v in arrays.items()}
        t = {k: torch.from_numpy(v).to(torch_device) for k, v in arrays.items()}
        _, t_idx = torch.nn.functional.max_pool2d(t["gy"], 2, return_indices=True)
        flops = 2.0 * n * o * h * w_ * c * 9
        shape = f"x[{n},{c},{h},{w_}] w[{o},{c},3,3]"
        act = f"[{n},{o},{h},{w_}]"
        act_bytes = 4.0 * n * o * h * w_

        def t_conv_bwd(mask: list[bool], t: dict[str, Any] = t) -> object:
            return aten.convolution_backward(t["gy"], t["x"], t["w"], None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                             mask)
        rows.append(Row(f"conv{layer} conv2d", shape, flops, "GFLOP/s",
                        lambda r=r: F.conv2d(r["x"], r["w"], padding=1),
                        lambda t=t: torch.nn.functional.conv2d(t["x"], t["w"], padding=1)))
        if layer > 1:
            rows.append(Row(f"conv{layer} conv2d_backward_input", shape, flops, "GFLOP/s",
                            lambda r=r, h=h: ops.get("conv2d_backward_input")(r["gy"], r["w"], input_size=(h, h),
                                                                              **CONV),
                            lambda f=t_conv_bwd: f([True, False, False])))
        rows.append(Row(f"conv{layer} conv2d_backward_weight", shape, flops, "GFLOP/s",
                        lambda r=r: ops.get("conv2d_backward_weight")(r["gy"], r["x"], kernel_size=(3, 3), **CONV),
                        lambda f=t_conv_bwd: f([False, True, False])))
        rows.append(Row(f"conv{layer} bias grad sum(0,2,3)", act, act_bytes, "GB/s",
                        lambda r=r: r["gy"].sum((0, 2, 3)), lambda t=t: t["gy"].sum((0, 2, 3))))
        rows.append(Row(f"conv{layer} relu_backward", act, 3 * act_bytes, "GB/s",
                        lambda r=r: ops.get("relu_backward")(r["gy"], r["gy"]),
                        lambda t=t: aten.threshold_backward(t["gy"], t["gy"], 0.0)))
        rows.append(Row(f"conv{layer} max_pool2d", act, 1.25 * act_bytes, "GB/s",
                        lambda r=r: F.max_pool2d(r["gy"], 2),
                        lambda t=t: torch.nn.functional.max_pool2d(t["gy"], 2)))
        rows.append(Row(f"conv{layer} max_pool2d_backward", act, 2.25 * act_bytes, "GB/s",
                        lambda r=r: ops.get("max_pool2d_backward")(r["gp"], r["gy"], **POOL),
                        lambda t=t, i=t_idx: aten.max_pool2d_with_indices_backward(
                            t["gp"], t["gy"], [2, 2], [2, 2], [0, 0], [1, 1], False, i)))
    return rows


def per_launch(fn: Callable[[], object], sync: Callable[[], object], min_s: float, max_r: int,
               reps: int) -> tuple[float, float, int]:
    """Torch (or any device without a recorder): (seconds per launch, host seconds per launch, R), the
    median of `reps` batches of R launches between two syncs, R doubled until a batch takes min_s."""
    fn()
    sync()
    r = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(r):
            fn()
        sync()
        if time.perf_counter() - t0 >= min_s or r >= max_r:
            break
        r = min(2 * r, max_r)
    total, host = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(r):
            fn()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        total.append((t2 - t0) / r)
        host.append((t1 - t0) / r)
    return statistics.median(total), statistics.median(host), r


MAX_PENDING = 900  # dispatches one pending batch may hold: its uniforms (256 B each) fit the 256 KiB ring


def gpu_per_launch(fn: Callable[[], object], rec: Any, max_r: int, reps: int) -> tuple[float, float, int]:
    """wgpu: (GPU seconds per launch, host seconds per launch, R). R launches are recorded into one pending
    batch, then the submit + sync is timed; the same for R/2, and the difference over R/2 launches is
    the GPU time of one (the submit and sync cost cancels)."""
    fn()
    rec.synchronize()
    before = rec.dispatches
    fn()
    per = max(1, rec.dispatches - before)
    rec.synchronize()
    r = max(2, min(max_r, MAX_PENDING // per) // 2 * 2)
    saved = rec.bound, rec.max_dispatches
    rec.bound = rec.max_dispatches = MAX_PENDING + 64

    def batch(n: int) -> tuple[float, float]:
        rec.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        rec.flush()
        rec.synchronize()
        return time.perf_counter() - t1, t1 - t0
    try:
        full, half, host = [], [], []
        for _ in range(reps):
            t_full, h = batch(r)
            full.append(t_full)
            host.append(h / r)
            half.append(batch(r // 2)[0])
    finally:
        rec.bound, rec.max_dispatches = saved
    return (statistics.median(full) - statistics.median(half)) / (r // 2), statistics.median(host), r


def _rate(work: float, seconds: float) -> str:
    return f"{work / seconds / 1e9:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="wgpu:0", help="rumus device (default wgpu:0)")
    p.add_argument("--torch-device", default=None, help="default: cuda when torch has it, else cpu")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--min-ms", type=float, default=2.0, help="torch: each timed batch lasts at least this")
    p.add_argument("--max-launches", type=int, default=512)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--only", default=None, help="rows whose name contains this text")
    args = p.parse_args(argv)
    import torch
    tdev = args.torch_device or ("cuda" if cuda_torch_fp32() is not None else "cpu")
    device = rm.device(args.device)
    sync_rm = (lambda: rm.synchronize(device)) if device.backend != "cpu" else (lambda: None)
    sync_t = torch.cuda.synchronize if tdev.startswith("cuda") else (lambda: None)
    print(f"rumus {device} vs torch {torch.__version__} on {tdev}; batch {args.batch}; "
          f"wgpu: GPU time per launch from recorded batches of R and R/2; torch: >= {args.min_ms} ms batches; "
          f"median of {args.reps}")
    out, sums = [], [0.0, 0.0]
    rec = rm.zeros(1, device=device)._arg.buffer.dev.recorder if device.backend == "wgpu" else None

    def timed(fn: Callable[[], object], sync: Callable[[], object]) -> tuple[float, float, int]:
        if rec is not None and sync is sync_rm:
            return gpu_per_launch(fn, rec, args.max_launches, args.reps)
        return per_launch(fn, sync, args.min_ms / 1e3, args.max_launches, args.reps)
    with rm.no_grad(), torch.no_grad():
        for row in _rows(args.batch, device, tdev):
            if args.only and args.only not in row.name:
                continue
            t_rm, host, r = timed(row.rumus, sync_rm)
            im2col = ""
            if row.unit == "GFLOP/s" and device.backend == "wgpu":
                os.environ[IM2COL_ENV] = "1"
                try:
                    im2col = f"{timed(row.rumus, sync_rm)[0] * 1e3:.4f}"
                finally:
                    del os.environ[IM2COL_ENV]
            t_t, _, _ = timed(row.torch, sync_t)
            sums[0] += t_rm
            sums[1] += t_t
            out.append((row.name, row.shape, f"{t_rm * 1e3:.4f}", im2col, f"{host * 1e3:.4f}", str(r),
                        f"{_rate(row.work, t_rm)} {row.unit}", f"{t_t * 1e3:.4f}", f"{_rate(row.work, t_t)}",
                        f"{t_rm / t_t:.2f}x"))
    out.append(("all rows", "", f"{sums[0] * 1e3:.3f}", "", "", "", "", f"{sums[1] * 1e3:.3f}", "",
                f"{sums[0] / max(sums[1], 1e-12):.2f}x"))
    print(table(out, ("kernel", "shape", "rumus ms", "im2col ms", "host ms", "R", "rumus rate", "torch ms",
                      "torch rate", "rumus/torch")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
