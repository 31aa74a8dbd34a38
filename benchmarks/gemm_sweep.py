"""WGSL GEMM tile sweep: every tile (and split-K count) of backends/rumus_wgpu/gemm.py on the shapes a
transformer step runs, in the layouts it runs them, with torch CUDA fp32 (TF32 off) beside it.

    RUMUS_BACKEND=wgpu python3 benchmarks/gemm_sweep.py            # the LM shapes + squares
    RUMUS_BACKEND=wgpu python3 benchmarks/gemm_sweep.py --quick    # fewer shapes (lavapipe smoke run)

Layouts: "nt" = x @ W.T (Linear forward, W stored [out, in]), "nn" = dY @ W (Linear's input gradient),
"tn" = dY.T @ x (Linear's weight gradient), all as views, no copies. Each cell: TFLOP/s, median of
synchronized batches. The plan column is what `_plan` picks today (no forcing). Rows run in one process, so
the buffer pool's cache cap (RUMUS_WGPU_POOL_CACHE_MB) can be reached in a full sweep: a row that is slow
there and fast with `--only` is paying for new buffers, not for its tiles.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _timing import cuda_torch_fp32, table  # noqa: E402

TOK, D, FF, V = 4096, 1024, 4096, 32000
LM = [("nt", TOK, 3 * D, D), ("nt", TOK, D, D), ("nt", TOK, FF, D), ("nt", TOK, D, FF), ("nt", TOK, V, D),
      ("nn", TOK, D, 3 * D), ("nn", TOK, D, FF), ("nn", TOK, FF, D), ("nn", TOK, D, V),
      ("tn", 3 * D, D, TOK), ("tn", FF, D, TOK), ("tn", D, FF, TOK), ("tn", V, D, TOK),
      ("nn", 1024, 1024, 1024), ("nn", 2048, 2048, 2048), ("nn", 4096, 4096, 4096), ("nn", 8192, 8192, 8192)]
QUICK = [("nt", 256, 256, 128), ("nn", 256, 128, 256), ("tn", 128, 256, 256)]
VARIANTS = ["plan", "128x128", "128x128k16", "128x64", "64x64", "64x64w", "128x128:2", "128x128:4", "64x64w:4"]


def _operands(lib: Any, layout: str, m: int, n: int, k: int, make: Any) -> tuple[Any, Any]:
    if layout == "nt":
        return make(m, k), make(n, k).T
    if layout == "nn":
        return make(m, k), make(k, n)
    return make(k, m).T, make(k, n)  # "tn"


def _time(fn: Any, sync: Any, reps: int, flops: float, budget: float = 0.6) -> float:
    fn()
    sync()
    per = max(1, min(20, int(0.02 / max(flops / 30e12, 1e-6))))  # ~20 ms of work per timed batch
    times = []
    start = time.perf_counter()
    while len(times) < reps or (time.perf_counter() - start < budget and len(times) < 3 * reps):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / per)
    return flops / statistics.median(times) / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="wgpu:0")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--only", nargs="*", default=[], help="only these rows, e.g. nt:4096x32000x1024")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
    import rumus as rm
    shapes = QUICK if args.quick else LM
    if args.only:  # "layout:MxNxK" rows, in the order given (any shape, listed or not)
        shapes = []
        for row in args.only:
            layout, dims = row.split(":")
            m, n, k = (int(v) for v in dims.split("x"))
            shapes.append((layout, m, n, k))
    variants = VARIANTS
    torch = None if args.no_torch else cuda_torch_fp32()
    rows = []
    for layout, m, n, k in shapes:
        flops = 2.0 * m * n * k
        a, b = _operands(rm, layout, m, n, k, lambda r, c: rm.randn(r, c, device=args.device))
        cells = []
        for v in variants:
            if v == "plan":
                os.environ.pop("RUMUS_WGPU_GEMM", None)
            else:
                os.environ["RUMUS_WGPU_GEMM"] = v
            try:
                tflops = _time(lambda a=a, b=b: a @ b, lambda: rm.synchronize(args.device), args.reps, flops)
                cells.append(f"{tflops:.3g}")
            except Exception as exc:  # a tile the device can't run (workgroup memory, grid): say so
                cells.append(type(exc).__name__)
        os.environ.pop("RUMUS_WGPU_GEMM", None)
        t = "-"
        if torch is not None:
            ta, tb = _operands(torch, layout, m, n, k, lambda r, c: torch.randn(r, c, device="cuda"))
            t = f"{_time(lambda ta=ta, tb=tb: ta @ tb, torch.cuda.synchronize, args.reps, flops):.3g}"
        rows.append((layout, f"{m}x{n}x{k}", *cells, t))
        print(rows[-1], flush=True)
    print("\nTFLOP/s (fp32), rumus WGSL tiles vs torch cuda (TF32 off); m x n x k")
    print(table(rows, ("layout", "m x n x k", *variants, "torch")))


if __name__ == "__main__":
    main()
