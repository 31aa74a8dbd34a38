"""CPU backend vs numpy and PyTorch CPU, in one run: small-op overhead, GEMM, an MLP training step.

    python benchmarks/cpu_core.py
    python benchmarks/cpu_core.py --record "dev (2 vCPU x86-64, shared)"   # also update benchmarks/results/
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import bench, table  # noqa: E402
from results_table import add_record_option, ratio_text, record_all  # noqa: E402

import rumus as rm  # noqa: E402
from rumus import nn  # noqa: E402

# The CPU backend starts (and loads libgomp with its short spin) before torch is imported below, as in
# torch_beside_rumus.py: `import rumus` alone changes nothing process-wide.
rm.zeros(1)


Figures = list[tuple[str, str, str, str, str]]  # (benchmark, what, rumus, reference, ratio) for --record


def small_op(figures: Figures) -> list[tuple[str, ...]]:
    import torch
    a, b = rm.randn(4), rm.randn(4)
    na, nb = a.numpy(), b.numpy()
    ta, tb = torch.from_numpy(na.copy()), torch.from_numpy(nb.copy())
    with rm.no_grad():
        t_rm = bench(lambda: a + b)
        t_rm_mul = bench(lambda: a * 2.0)
        t_rm_sum = bench(lambda: a.sum())
    with torch.no_grad():
        t_torch = bench(lambda: ta + tb)
        t_torch_mul = bench(lambda: ta * 2.0)
        t_torch_sum = bench(lambda: ta.sum())
    t_np = bench(lambda: na + nb)
    figures.append(("cpu-op-overhead", "per-op overhead, `a + b` on 4 floats under no_grad (CPU)",
                    f"{t_rm * 1e6:.2f} µs", f"torch {t_torch * 1e6:.2f} µs", ratio_text(t_rm, t_torch)))
    rows = []
    for name, r, t, n in (("add [4]+[4] (no_grad)", t_rm, t_torch, t_np), ("mul [4]*2.0", t_rm_mul, t_torch_mul, None),
                          ("sum [4]", t_rm_sum, t_torch_sum, None)):
        rows.append((name, f"{r * 1e6:.2f} us", f"{t * 1e6:.2f} us", f"{n * 1e6:.2f} us" if n else "-",
                     f"{r / t:.2f}x", f"{r / n:.2f}x" if n else "-"))
    return rows


def gemm(figures: Figures, n: int = 1024) -> list[tuple[str, ...]]:
    import torch
    a, b = rm.randn(n, n), rm.randn(n, n)
    na, nb = a.numpy(), b.numpy()
    ta, tb = torch.from_numpy(na.copy()), torch.from_numpy(nb.copy())
    with rm.no_grad():
        t_rm = bench(lambda: a @ b, min_time=1.0)
        t_rm_t = bench(lambda: a @ b.T, min_time=1.0)
    t_np = bench(lambda: na @ nb, min_time=1.0)
    t_torch = bench(lambda: ta @ tb, min_time=1.0)
    flops = 2 * n**3
    figures.append((f"cpu-gemm-{n}", f"GEMM {n}² float32 (CPU)", f"{flops / t_rm / 1e9:.1f} GFLOP/s",
                    f"torch {flops / t_torch / 1e9:.1f} GFLOP/s", ratio_text(t_rm, t_torch)))
    return [(f"GEMM {n}x{n} fp32", f"{flops / t_rm / 1e9:.1f} GFLOP/s", f"{flops / t_torch / 1e9:.1f} GFLOP/s",
             f"{flops / t_np / 1e9:.1f} GFLOP/s", f"{t_rm / t_torch:.2f}x", f"{t_rm / t_np:.2f}x"),
            (f"GEMM {n}x{n} fp32, B transposed view", f"{flops / t_rm_t / 1e9:.1f} GFLOP/s", "-", "-", "-",
             f"{t_rm_t / t_np:.2f}x")]


def mlp_step(figures: Figures, batch: int = 128) -> list[tuple[str, ...]]:
    import torch
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)
    x = rm.randn(batch, 784)
    y = rm.randn(batch, 10)
    loss_fn = nn.MSELoss()

    def rm_step() -> None:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                             torch.nn.ReLU(), torch.nn.Linear(256, 10))
    topt = torch.optim.Adam(tm.parameters(), lr=1e-3)
    tx, ty = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    tloss = torch.nn.MSELoss()

    def torch_step() -> None:
        topt.zero_grad(set_to_none=True)
        loss = tloss(tm(tx), ty)
        loss.backward()
        topt.step()

    t_rm = bench(rm_step, min_time=2.0)
    t_torch = bench(torch_step, min_time=2.0)
    figures.append(("cpu-mlp-step", f"MLP 784-256-256-10 Adam training step, batch {batch} (CPU)",
                    f"{t_rm * 1e3:.2f} ms", f"torch {t_torch * 1e3:.2f} ms", ratio_text(t_rm, t_torch)))
    return [(f"MLP 784-256-256-10 Adam step, batch {batch}", f"{t_rm * 1e3:.3f} ms", f"{t_torch * 1e3:.3f} ms",
             "-", f"{t_rm / t_torch:.2f}x", "-")]


def main(argv: list[str] | None = None) -> None:
    import torch
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_record_option(p)
    args = p.parse_args(argv)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; numpy {np.__version__}; "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads); rumus {rm.__version__}")
    figures: Figures = []
    rows = small_op(figures) + gemm(figures) + mlp_step(figures)
    print(table(rows, ("benchmark", "rumus", "torch CPU", "numpy", "rumus/torch", "rumus/numpy")))
    print("(time ratios: < 1 means rumus is faster; GFLOP/s rows compare time too)")
    record_all(args.record, "python benchmarks/cpu_core.py", figures)


if __name__ == "__main__":
    main()
