"""A CNN training step, rumus vs PyTorch in one run (batch 64 of 1x28x28, two conv+pool blocks, Adam):

    conv 1->16 k3 p1 -> relu -> maxpool 2 -> conv 16->32 k3 p1 -> relu -> maxpool 2 -> linear 32*7*7 -> 10

    python benchmarks/nn_cnn.py                      # rumus on the default device (RUMUS_BACKEND), torch on CPU
    python benchmarks/nn_cnn.py --device wgpu --torch-device cuda

Both models start from the same weights and see the same batch. On the CPU the table has three rows:
every thread both libraries use by default; the rumus C kernels on one thread (RUMUS_NUM_THREADS=1)
with BLAS as it is, since OpenMP teams that start right after OpenBLAS calls wait on its spinning
threads; and one thread each (BLAS included), the steadiest number on a machine other processes share.
Steps are timed interleaved, so drift hits both sides alike.
`cnn_step_benchmark(device)` returns the numbers for use from other scripts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table  # noqa: E402
from results_table import add_record_option, ratio_text, record_all  # noqa: E402

import rumus as rm  # noqa: E402
from rumus import nn  # noqa: E402
from rumus.nn import functional as F  # noqa: E402


def _models(batch: int, device: Any, torch_device: str) -> tuple[Callable[[], None], Callable[[], None]]:
    import torch
    torch.manual_seed(0)
    tm = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10)).to(torch_device)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    model.load_state_dict({k: rm.tensor(v.detach().cpu().numpy()) for k, v in tm.state_dict().items()})
    model.to(device)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    ys = rng.integers(0, 10, batch)
    x, y = rm.tensor(xs, device=device), rm.tensor(ys, device=device)
    tx, ty = torch.from_numpy(xs).to(torch_device), torch.from_numpy(ys).to(torch_device)
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-3)
    sync_rm = (lambda: rm.synchronize(device)) if rm.device(str(device)).backend != "cpu" else (lambda: None)
    sync_torch = torch.cuda.synchronize if torch_device.startswith("cuda") else (lambda: None)

    def rm_step() -> None:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        sync_rm()

    def torch_step() -> None:
        topt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(tm(tx), ty)
        loss.backward()
        topt.step()
        sync_torch()

    return rm_step, torch_step


def _interleaved(a: Callable[[], None], b: Callable[[], None], rounds: int, per_round: int) -> tuple[float, float]:
    """Median seconds per call of a and b, timed in alternating batches."""
    for fn in (a, b):
        for _ in range(3):
            fn()
    ta, tb = [], []
    for _ in range(rounds):
        for fn, out in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()
            out.append((time.perf_counter() - t0) / per_round)
    return statistics.median(ta), statistics.median(tb)


THREAD_MODES = {"default": "default threads", "kernels1": "rumus C kernels 1 thread", "single": "1 thread each"}


@contextlib.contextmanager
def _threads(mode: str) -> Iterator[None]:
    """"kernels1": the rumus CPU kernels on one thread; "single": torch, numpy's BLAS and the rumus CPU
    kernels on one thread each; restored afterwards."""
    if mode == "default":
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits
    from rumus_cpu import threads
    before_torch, before_rm = torch.get_num_threads(), threads.get_num_threads()
    threads.set_num_threads(1)
    try:
        if mode == "single":
            torch.set_num_threads(1)
            with threadpool_limits(1):
                yield
        else:
            yield
    finally:
        torch.set_num_threads(before_torch)
        threads.set_num_threads(before_rm)


def cnn_step_benchmark(device: Any = None, torch_device: str = "cpu", batch: int = 64, rounds: int = 7,
                       per_round: int = 5, threads: str = "default") -> dict[str, float]:
    """Seconds per training step for rumus on `device` and PyTorch on `torch_device`, and their ratio.
    `threads` ("default", "kernels1", "single") applies to CPU runs only."""
    device = device if device is not None else rm.default_device()
    rm_step, torch_step = _models(batch, device, torch_device)
    ctx = _threads(threads) if rm.device(str(device)).backend == "cpu" else contextlib.nullcontext()
    with ctx:
        t_rm, t_torch = _interleaved(rm_step, torch_step, rounds, per_round)
    return {"rumus_s": t_rm, "torch_s": t_torch, "ratio": t_rm / t_torch}


def main(argv: list[str] | None = None) -> int:
    import torch
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="rumus device (default: RUMUS_BACKEND or cpu)")
    p.add_argument("--torch-device", default="cpu")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    add_record_option(p)
    args = p.parse_args(argv)
    device = rm.device(args.device) if args.device else rm.default_device()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); rumus {rm.__version__} on {device}")
    modes = list(THREAD_MODES) if device.backend == "cpu" and args.torch_device == "cpu" else ["default"]
    rows, figures = [], []
    for mode in modes:
        label = THREAD_MODES[mode]
        r = cnn_step_benchmark(device, args.torch_device, args.batch, args.rounds, threads=mode)
        if mode == "default":
            where = "CPU, default threads" if device.backend == "cpu" else f"{device}, torch {args.torch_device}"
            name = "cpu-cnn-step" if device.backend == "cpu" else f"{device.backend}-cnn-step"
            figures.append((name, f"CNN training step, batch {args.batch} ({where})", f"{r['rumus_s'] * 1e3:.2f} ms",
                            f"torch {r['torch_s'] * 1e3:.2f} ms", ratio_text(r["rumus_s"], r["torch_s"])))
        rows.append((f"CNN train step, batch {args.batch} ({label})", f"{r['rumus_s'] * 1e3:.2f} ms",
                     f"{r['torch_s'] * 1e3:.2f} ms", f"{r['ratio']:.2f}x"))
    print(table(rows, ("benchmark", f"rumus {device}", f"torch {args.torch_device}", "rumus/torch")))
    print("(median of interleaved rounds; < 1x means rumus is faster)")
    record_all(args.record, "python benchmarks/nn_cnn.py" + (f" --device {device}" if args.device else ""), figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
