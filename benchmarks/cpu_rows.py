"""CPU row ops vs PyTorch CPU, in one run: softmax / log_softmax forward (no_grad) and forward+backward,
over short, medium and long rows, contiguous and along a strided dim.

    python benchmarks/cpu_rows.py            # the table
    python benchmarks/cpu_rows.py --raw      # one "name seconds" line per rumus row (for A/B scripts)
"""

# ruff: noqa: B023  (every closure below is timed inside the loop iteration that made it)
from __future__ import annotations

import os
import sys
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import bench, table  # noqa: E402

import rumus as rm  # noqa: E402
from rumus.nn import functional as F  # noqa: E402

SHAPES = [((4096, 40), -1), ((256, 1024), -1), ((64, 32000), -1), ((64, 256, 64), 1)]


def cases() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    import torch
    out = []
    rng = np.random.default_rng(0)
    for shape, dim in SHAPES:
        host = rng.standard_normal(shape).astype(np.float32)
        x, tx = rm.tensor(host), torch.from_numpy(host.copy())
        g, tg = rm.tensor(host[::-1].copy()), torch.from_numpy(host[::-1].copy())
        for op in ("softmax", "log_softmax"):
            f, tf = getattr(F, op), getattr(torch.nn.functional, op)
            tag = f"{op} {'x'.join(map(str, shape))} dim={dim}"

            def fwd() -> object:
                with rm.no_grad():
                    return f(x, dim=dim)

            def tfwd() -> object:
                with torch.no_grad():
                    return tf(tx, dim=dim)
            xg, txg = x.detach().requires_grad_(True), tx.detach().requires_grad_(True)

            def both() -> object:
                y = f(xg, dim=dim)
                y.backward(g)
                return xg.grad

            def tboth() -> object:
                y = tf(txg, dim=dim)
                y.backward(tg)
                return txg.grad
            out += [(tag, fwd, tfwd), (tag + " fwd+bwd", both, tboth)]
    return out


def main() -> None:
    raw = "--raw" in sys.argv
    rows = []
    for name, ours, ref in cases():
        t = bench(ours, min_time=0.2)
        if raw:
            print(f"{name}\t{t:.6e}", flush=True)
            continue
        tr = bench(ref, min_time=0.2)
        rows.append((name, f"{t * 1e3:.3f} ms", f"{tr * 1e3:.3f} ms", f"{t / tr:.2f}x"))
    if not raw:
        print(table(rows, ("benchmark", "rumus", "torch CPU", "rumus/torch")))


if __name__ == "__main__":
    main()
