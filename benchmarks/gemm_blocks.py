"""The MLP step's matrix products (and two squares) on the CPU backend against torch CPU, at several thread counts.

    python benchmarks/gemm_blocks.py                       # 16, 8 and 1 threads (the 16-core host)
    python benchmarks/gemm_blocks.py --threads 2 1         # the dev machine

Each library runs in its own process (torch's OpenMP threads never share one with RUMUS's pool), the thread
count set at run time. Rows: the products of a 784-256-256-10 MLP at batch 128 in the layouts its training
step runs them ("nt" = x @ W.T, Linear's forward; "nn" = dY @ W, the input gradient; "tn" = dY.T @ x, the
weight gradient), 1024^2 and 512^2 products, and the whole step (Adam, MSE). Cells: microseconds, the best
of 9 batches of calls (a shared host's busy moments inflate the median; the best is the code's own cost),
the step also with its median. csrc/gemm_blocked.c's block rule (block size and side, GEMM grain) was chosen
with this benchmark's products: see benchmarks/RESULTS.md, "session 8".
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
# (name, m, n, k, layout): C[m, n] = op(A) @ op(B) over k
SHAPES = [("fwd1 nt 128x256x784", 128, 256, 784, "nt"), ("fwd2 nt 128x256x256", 128, 256, 256, "nt"),
          ("fwd3 nt 128x10x256", 128, 10, 256, "nt"), ("dX2 nn 128x256x256", 128, 256, 256, "nn"),
          ("dW1 tn 256x784x128", 256, 784, 128, "tn"), ("dW2 tn 256x256x128", 256, 256, 128, "tn"),
          ("nn 1024²", 1024, 1024, 1024, "nn"), ("nn 512²", 512, 512, 512, "nn")]


def best(fn: Callable[[], object], windows: int = 9) -> tuple[float, float]:
    """(best, median) microseconds per call over `windows` batches lasting about 2 ms each."""
    fn()
    fn()
    t = time.perf_counter()
    fn()
    n = max(1, min(20, int(2e-3 / max(time.perf_counter() - t, 1e-6))))
    out = []
    for _ in range(windows):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
    return min(out) * 1e6, statistics.median(out) * 1e6


def _operands(m: int, n: int, k: int, layout: str) -> tuple[object, object]:
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if layout == "tn" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "nt" else (k, n)).astype(np.float32)
    return a, b


def _product(a: object, b: object, layout: str) -> Callable[[], object]:
    if layout == "nt":
        return lambda: a @ b.mT  # type: ignore[attr-defined,operator]
    if layout == "tn":
        return lambda: a.mT @ b  # type: ignore[attr-defined]
    return lambda: a @ b  # type: ignore[operator]


def worker(lib: str, counts: list[int]) -> None:
    sys.path.insert(0, HERE)
    if lib == "rumus":
        import _rumus_small_models
        import rumus as rm
        from rumus_cpu import threads
        step = _rumus_small_models.rumus_mlp_step()
        tensor, set_threads = rm.tensor, threads.set_num_threads
    else:
        import torch
        import _torch_small_models
        step = _torch_small_models.torch_mlp_step()
        tensor, set_threads = torch.from_numpy, torch.set_num_threads
    products = []
    for _, m, n, k, layout in SHAPES:
        a, b = _operands(m, n, k, layout)
        products.append(_product(tensor(a), tensor(b), layout))
    for count in counts:
        set_threads(count)
        cells = [f"{best(p)[0]:.0f}" for p in products]
        s = best(step, windows=15)
        print("\t".join([lib, str(count), *cells, f"{s[0] / 1e3:.3f}", f"{s[1] / 1e3:.3f}"]), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[16, 8, 1])
    ap.add_argument("--worker", choices=["rumus", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads)
        return 0
    env = {**os.environ, "RUMUS_BACKEND": "cpu", "RUMUS_NUM_THREADS": str(max(args.threads))}
    rows: dict[tuple[str, int], list[str]] = {}
    for lib in ("rumus", "torch"):
        out = subprocess.run([sys.executable, __file__, "--worker", lib, "--threads", *map(str, args.threads)],
                             env=env, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name, count, *cells = line.split("\t")
            rows[(name, int(count))] = cells
    print("| product (µs) | " + " | ".join(f"{c} thr rumus / torch" for c in args.threads) + " |")
    print("|---" * (len(args.threads) + 1) + "|")
    for i, (name, *_) in enumerate([*SHAPES, ("MLP step, ms (best; median)",)]):
        cells = []
        for c in args.threads:
            r, t = rows[("rumus", c)], rows[("torch", c)]
            if i < len(SHAPES):
                cells.append(f"{r[i]} / {t[i]} ({float(r[i]) / float(t[i]):.2f}×)")
            else:
                cells.append(f"{r[i]} / {t[i]} ({float(r[i]) / float(t[i]):.2f}×); {r[i + 1]} / {t[i + 1]}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
