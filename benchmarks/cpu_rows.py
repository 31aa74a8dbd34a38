"""CPU row ops vs PyTorch CPU, in one run: softmax / log_softmax forward (no_grad) and forward+backward,
over short, medium and long rows, contiguous and along a strided dim; logsumexp; layer_norm and rms_norm
forward and forward+backward; cross-entropy forward and forward+backward (plain, and with class weights,
label smoothing and ignored rows).

    python benchmarks/cpu_rows.py               # the table
    python benchmarks/cpu_rows.py --raw         # "name  wall s  CPU s" per rumus row (for A/B scripts)
    python benchmarks/cpu_rows.py --only norm   # the cases whose name holds "norm"

On a loaded machine run the A/B at RUMUS_NUM_THREADS=1 and compare the CPU seconds: one thread's CPU
time is the kernel's cost, whatever else the scheduler runs.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

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

            # every closure binds its case's values now (they are timed after the loop)
            def fwd(f: Any = f, x: Any = x, dim: int = dim) -> object:
                with rm.no_grad():
                    return f(x, dim=dim)

            def tfwd(tf: Any = tf, tx: Any = tx, dim: int = dim) -> object:
                with torch.no_grad():
                    return tf(tx, dim=dim)

            xg, txg = x.detach().requires_grad_(True), tx.detach().requires_grad_(True)

            def both(f: Any = f, xg: Any = xg, g: Any = g, dim: int = dim) -> object:
                f(xg, dim=dim).backward(g)
                return xg.grad

            def tboth(tf: Any = tf, txg: Any = txg, tg: Any = tg, dim: int = dim) -> object:
                tf(txg, dim=dim).backward(tg)
                return txg.grad
            out += [(tag, fwd, tfwd), (tag + " fwd+bwd", both, tboth)]

        def lse(x: Any = x, dim: int = dim) -> object:
            with rm.no_grad():
                return rm.logsumexp(x, dim)

        def tlse(tx: Any = tx, dim: int = dim) -> object:
            with torch.no_grad():
                return torch.logsumexp(tx, dim)
        out.append((f"logsumexp {'x'.join(map(str, shape))} dim={dim}", lse, tlse))
    for rows, cols in ((4096, 64), (512, 1024), (64, 8192)):
        host = rng.standard_normal((rows, cols)).astype(np.float32)
        x, tx = rm.tensor(host), torch.from_numpy(host.copy())
        w = rm.tensor(rng.standard_normal(cols).astype(np.float32))
        b, tw = rm.tensor(rng.standard_normal(cols).astype(np.float32)), torch.from_numpy(w.numpy().copy())
        tb = torch.from_numpy(b.numpy().copy())
        tag = f"layer_norm {rows}x{cols}"

        def ln(x: Any = x, w: Any = w, b: Any = b, cols: int = cols) -> object:
            with rm.no_grad():
                return F.layer_norm(x, (cols,), w, b)

        def tln(tx: Any = tx, tw: Any = tw, tb: Any = tb, cols: int = cols) -> object:
            with torch.no_grad():
                return torch.nn.functional.layer_norm(tx, (cols,), tw, tb)

        def rms(x: Any = x, w: Any = w, cols: int = cols) -> object:
            with rm.no_grad():
                return F.rms_norm(x, (cols,), w)

        def trms(tx: Any = tx, tw: Any = tw, cols: int = cols) -> object:
            with torch.no_grad():
                return torch.nn.functional.rms_norm(tx, (cols,), tw)
        out += [(tag, ln, tln), (f"rms_norm {rows}x{cols}", rms, trms)]
        xg, wg, bg = (t.detach().requires_grad_(True) for t in (x, w, b))
        txg, twg, tbg = (t.detach().requires_grad_(True) for t in (tx, tw, tb))
        g, tg = rm.tensor(host[::-1].copy()), torch.from_numpy(host[::-1].copy())

        def ln_both(xg: Any = xg, wg: Any = wg, bg: Any = bg, g: Any = g, cols: int = cols) -> object:
            F.layer_norm(xg, (cols,), wg, bg).backward(g)
            return xg.grad

        def tln_both(txg: Any = txg, twg: Any = twg, tbg: Any = tbg, tg: Any = tg, cols: int = cols) -> object:
            torch.nn.functional.layer_norm(txg, (cols,), twg, tbg).backward(tg)
            return txg.grad

        def rms_both(xg: Any = xg, wg: Any = wg, g: Any = g, cols: int = cols) -> object:
            F.rms_norm(xg, (cols,), wg).backward(g)
            return xg.grad

        def trms_both(txg: Any = txg, twg: Any = twg, tg: Any = tg, cols: int = cols) -> object:
            torch.nn.functional.rms_norm(txg, (cols,), twg).backward(tg)
            return txg.grad
        out += [(tag + " fwd+bwd", ln_both, tln_both), (f"rms_norm {rows}x{cols} fwd+bwd", rms_both, trms_both)]
    return out + cross_entropy_cases(rng)


def cross_entropy_cases(rng: np.random.Generator) -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    import torch
    out = []
    for rows, classes in ((4096, 10), (512, 1000), (64, 32000)):
        host = rng.standard_normal((rows, classes)).astype(np.float32)
        target = rng.integers(0, classes, rows)
        target[::7] = -100  # some ignored rows
        weight = rng.uniform(0.5, 2.0, classes).astype(np.float32)
        x, tx = rm.tensor(host), torch.from_numpy(host.copy())
        t, tt = rm.tensor(target), torch.from_numpy(target.copy())
        for label, kw in (("", {}), (" w+ls", {"label_smoothing": 0.1})):
            w, tw = (rm.tensor(weight), torch.from_numpy(weight.copy())) if kw else (None, None)
            tag = f"cross_entropy {rows}x{classes}{label}"

            def ce(x: Any = x, t: Any = t, w: Any = w, kw: Any = kw) -> object:
                with rm.no_grad():
                    return F.cross_entropy(x, t, weight=w, **kw)

            def tce(tx: Any = tx, tt: Any = tt, tw: Any = tw, kw: Any = kw) -> object:
                with torch.no_grad():
                    return torch.nn.functional.cross_entropy(tx, tt, weight=tw, **kw)
            xg, txg = x.detach().requires_grad_(True), tx.detach().requires_grad_(True)

            def ce_both(xg: Any = xg, t: Any = t, w: Any = w, kw: Any = kw) -> object:
                F.cross_entropy(xg, t, weight=w, **kw).backward()
                return xg.grad

            def tce_both(txg: Any = txg, tt: Any = tt, tw: Any = tw, kw: Any = kw) -> object:
                torch.nn.functional.cross_entropy(txg, tt, weight=tw, **kw).backward()
                return txg.grad
            out += [(tag, ce, tce), (tag + " fwd+bwd", ce_both, tce_both)]
    return out


def cpu_seconds(fn: Callable[[], object], calls: int = 20, repeats: int = 7) -> float:
    """Process CPU seconds per call: the least of `repeats` batches of `calls` calls."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t0) / calls)
    return best


def main() -> None:
    raw = "--raw" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    rows = []
    for name, ours, ref in cases():
        if only not in name:
            continue
        if raw:
            print(f"{name}\t{bench(ours, min_time=0.1, repeats=3):.6e}\t{cpu_seconds(ours):.6e}", flush=True)
            continue
        t = bench(ours, min_time=0.2)
        tr = bench(ref, min_time=0.2)
        rows.append((name, f"{t * 1e3:.3f} ms", f"{tr * 1e3:.3f} ms", f"{t / tr:.2f}x"))
    if not raw:
        print(table(rows, ("benchmark", "rumus", "torch CPU", "rumus/torch")))


if __name__ == "__main__":
    main()
