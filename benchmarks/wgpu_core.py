"""The wgpu backend against PyTorch CUDA on the same GPU, in one run.

fp32 GEMM at n = 1024 / 4096 / 8192 (TF32 off on the torch side) in TFLOP/s, a large elementwise add
and a full sum reduction in GB/s, with the wgpu/torch ratio of each. Both sides report GPU time: torch
through CUDA events; wgpu by recording `reps` kernels (nothing is submitted while recording) and
timing the one submit plus host wait that runs them.

    python benchmarks/wgpu_core.py [--sizes 1024 4096 8192] [--sweep] [--json results.json]

`--sweep` also times every GEMM tile plan (and split-K count) per size, the data behind
`rumus_wgpu.gemm._plan`. More comparisons (the MLP training step) plug in through `EXTRA_BENCHMARKS`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rumus_contracts import Device, TensorArg, contiguous_strides, float32

sys.path.insert(0, os.path.dirname(__file__))
from _timing import cuda_torch_fp32  # noqa: E402

SWEEP_PLANS = ("128x128", "128x128/checked", "128x64", "64x64", "64x64w", "128x128k16", "128x128:2", "128x128:4",
               "128x128:8", "128x64:2", "128x64:4", "64x64:4")  # "/checked": naga's runtime bounds checks on
SHAPE_PLANS = (None, "64x64w", "64x64w:2", "64x64w:4", "128x128:4", "64x64", "128x128")


@dataclass
class Row:
    case: str
    wgpu: float
    torch: float | None
    unit: str
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return self.wgpu / self.torch if self.torch else None


class Context:
    """The wgpu backend and device under test, plus torch when CUDA is there."""

    def __init__(self) -> None:
        from rumus_wgpu.backend import WgpuBackend
        self.backend = WgpuBackend()
        self.device = Device("wgpu", 0)
        self.torch: Any = cuda_torch_fp32()

    def tensor(self, array: np.ndarray) -> TensorArg:
        buf = self.backend.from_numpy(self.device, array, float32)
        return TensorArg(buf, array.shape, contiguous_strides(array.shape), 0, float32)

    def empty(self, shape: tuple[int, ...]) -> TensorArg:
        buf = self.backend.allocate(self.device, int(np.prod(shape)), float32)
        return TensorArg(buf, shape, contiguous_strides(shape), 0, float32)

    def wgpu_seconds(self, record: Callable[[], None], reps: int) -> float:
        """GPU seconds per call: `reps` calls recorded, then one timed submit + wait."""
        b, d = self.backend, self.device
        record()
        b.synchronize(d)
        before = b.stats(d)["dispatches"]
        record()
        b.synchronize(d)
        per_call = max(1, b.stats(d)["dispatches"] - before)
        reps = max(1, min(reps, (b.device(d).recorder.max_dispatches - 1) // per_call))
        t0 = time.perf_counter()
        for _ in range(reps):
            record()
        t1 = time.perf_counter()
        b.synchronize(d)
        t2 = time.perf_counter()
        self.last_host_us = (t1 - t0) / reps * 1e6
        return (t2 - t1) / reps

    def torch_seconds(self, fn: Callable[[], Any], reps: int) -> float | None:
        if self.torch is None:
            return None
        torch = self.torch
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / reps


def gemm_rows(ctx: Context, m: int, n: int, k: int, plans: tuple[str | None, ...] = (None,),
              transposed_b: bool = False) -> list[Row]:
    """fp32 C[m, n] = A[m, k] @ B[k, n] for each plan (None: the planner's choice)."""
    rng = np.random.default_rng(0)
    a_host = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b_host = rng.uniform(-1, 1, (n, k) if transposed_b else (k, n)).astype(np.float32)
    a, b, c = ctx.tensor(a_host), ctx.tensor(b_host), ctx.empty((m, n))
    if transposed_b:  # B = W.T for a row-major W [n, k]: the Linear-layer layout
        b = TensorArg(b.buffer, (k, n), (1, k), 0, float32)
    flops = 2.0 * m * n * k
    reps = int(min(100, max(3, 0.25 / (flops / 25e12))))
    matmul = ctx.backend.kernels["matmul"]
    t_torch = None
    if ctx.torch is not None:
        ta, tb = ctx.torch.from_numpy(a_host).cuda(), ctx.torch.from_numpy(b_host).cuda()
        tb = tb.T if transposed_b else tb
        tc = ctx.torch.empty((m, n), device="cuda")
        t_torch = ctx.torch_seconds(lambda: ctx.torch.matmul(ta, tb, out=tc), reps)
    name = f"gemm fp32 n={m}" if m == n == k else f"gemm fp32 {m}x{n}x{k}"
    rows = []
    for plan in plans:
        os.environ.pop("RUMUS_WGPU_CHECKED", None)
        os.environ.pop("RUMUS_WGPU_GEMM", None)
        if plan:
            os.environ["RUMUS_WGPU_GEMM"] = plan.split("/")[0]
            if plan.endswith("/checked"):
                os.environ["RUMUS_WGPU_CHECKED"] = "1"
        try:
            t = ctx.wgpu_seconds(lambda: matmul([c], [a, b], {}), reps)
        except Exception as exc:  # a plan the device cannot run (e.g. workgroup memory)
            print(f"  {name} plan={plan}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        finally:
            os.environ.pop("RUMUS_WGPU_GEMM", None)
            os.environ.pop("RUMUS_WGPU_CHECKED", None)
        from rumus_wgpu.gemm import _plan
        used = plan or "{}:{}".format(*_plan(m, n, k, 1))
        err = ""
        if ctx.torch is not None:
            got, want = ctx.backend.to_numpy(c), tc.cpu().numpy()
            err = f", max rel err {float(np.abs(got - want).max() / np.abs(want).max()):.1e}"
        rows.append(Row(f"{name}{' B=W.T' if transposed_b else ''}", flops / t / 1e12,
                        flops / t_torch / 1e12 if t_torch else None, "TFLOP/s",
                        f"plan {used}, host {ctx.last_host_us:.0f} us/call{err}"))
    return rows


def add_row(ctx: Context, n: int = 1 << 26, label: str = "") -> Row:
    x, y, out = ctx.tensor(np.ones(n, np.float32)), ctx.tensor(np.ones(n, np.float32)), ctx.empty((n,))
    add = ctx.backend.kernels["add"]
    t = ctx.wgpu_seconds(lambda: add([out], [x, y], {}), 20)
    moved = 3 * 4 * n
    t_torch = None
    if ctx.torch is not None:
        tx, ty = ctx.torch.ones(n, device="cuda"), ctx.torch.ones(n, device="cuda")
        to = ctx.torch.empty(n, device="cuda")
        t_torch = ctx.torch_seconds(lambda: ctx.torch.add(tx, ty, out=to), 20)
    return Row(f"add fp32 n=2^{n.bit_length() - 1}{label}", moved / t / 1e9,
               moved / t_torch / 1e9 if t_torch else None, "GB/s")


def sum_row(ctx: Context, n: int = 1 << 26, label: str = "") -> Row:
    x, out = ctx.tensor(np.ones(n, np.float32)), ctx.empty((1,))
    total = ctx.backend.kernels["sum"]
    t = ctx.wgpu_seconds(lambda: total([out], [x], {"dims": (0,)}), 20)
    moved = 4 * n
    t_torch = None
    if ctx.torch is not None:
        tx = ctx.torch.ones(n, device="cuda")
        t_torch = ctx.torch_seconds(lambda: tx.sum(), 20)
    value = float(ctx.backend.to_numpy(out)[0])
    return Row(f"sum fp32 n=2^{n.bit_length() - 1}{label}", moved / t / 1e9,
               moved / t_torch / 1e9 if t_torch else None, "GB/s", f"result {value:.0f}")


def latency_row(ctx: Context) -> Row:
    """One submit plus a 4-byte read-back (what every host sync costs)."""
    x = ctx.tensor(np.ones(1, np.float32))
    ctx.backend.to_numpy(x)
    t0 = time.perf_counter()
    for _ in range(50):
        ctx.backend.to_numpy(x)
    t = (time.perf_counter() - t0) / 50
    t_torch = None
    if ctx.torch is not None:
        tx = ctx.torch.ones(1, device="cuda")
        tx.cpu()
        t1 = time.perf_counter()
        for _ in range(50):
            tx.cpu()
        t_torch = (time.perf_counter() - t1) / 50
    return Row("sync: 4-byte read-back", t * 1e6, t_torch * 1e6 if t_torch else None, "us", "lower is better")


def mlp_training_step(ctx: Context, steps: int = 50) -> list[Row]:
    """The foundation benchmark's MLP (784-256-256-10, batch 128, Adam, MSE) through the whole core on
    wgpu vs torch CUDA; each step reads the loss (`.item()`), the one host sync a training loop needs."""
    import time

    import rumus as rm
    from rumus import nn
    dev = str(ctx.device)
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)
    x, y = rm.randn(128, 784, device=dev), rm.randn(128, 10, device=dev)
    loss_fn = nn.MSELoss()

    def step() -> float:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return float(loss.item())

    for _ in range(5):
        step()
    core_backend = rm._runtime.backend("wgpu")  # the instance the core dispatches to
    before = dict(core_backend.stats(ctx.device))
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    t_rm = (time.perf_counter() - t0) / steps
    after = core_backend.stats(ctx.device)
    per = {k: (after[k] - before.get(k, 0)) / steps for k in ("submits", "syncs", "dispatches") if k in after}
    t_torch = None
    if ctx.torch is not None:
        torch = ctx.torch
        tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                 torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
        topt = torch.optim.Adam(tm.parameters(), lr=1e-3)
        tx, ty = torch.randn(128, 784, device="cuda"), torch.randn(128, 10, device="cuda")

        def tstep() -> float:
            topt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(tm(tx), ty)
            loss.backward()
            topt.step()
            return float(loss.item())

        for _ in range(5):
            tstep()
        t0 = time.perf_counter()
        for _ in range(steps):
            tstep()
        t_torch = (time.perf_counter() - t0) / steps
    note = ", ".join(f"{v:g} {k}/step" for k, v in per.items())
    return [Row("MLP 784-256-256-10 Adam step", t_rm * 1e3, t_torch * 1e3 if t_torch else None, "ms",
                f"time ratio (lower is better); {note}")]


EXTRA_BENCHMARKS: list[Callable[[Context], list[Row]]] = [mlp_training_step]


def print_table(rows: list[Row], title: str) -> None:
    print(f"\n{title}")
    print(f"{'case':32} {'wgpu':>10} {'torch':>10} {'unit':>8} {'ratio':>6}  note")
    for r in rows:
        torch = f"{r.torch:10.1f}" if r.torch else f"{'-':>10}"
        ratio = f"{r.ratio:6.2f}" if r.ratio else f"{'-':>6}"
        print(f"{r.case:32} {r.wgpu:10.2f} {torch} {r.unit:>8} {ratio}  {r.note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--sweep", action="store_true", help="time every GEMM plan per size")
    parser.add_argument("--shapes", nargs="*", default=[], help="MxNxK shapes to time with SHAPE_PLANS")
    parser.add_argument("--log2-elements", type=int, default=26, help="size of the add / sum cases")
    parser.add_argument("--json", help="write all rows here")
    args = parser.parse_args()
    ctx = Context()
    caps = ctx.backend.capabilities(ctx.device)
    print(f"wgpu device: {caps.description}; features {', '.join(caps.features)}")
    if ctx.torch is not None:
        print(f"torch {ctx.torch.__version__} on {ctx.torch.cuda.get_device_name()}, TF32 off")
    sweep: list[Row] = []
    if args.sweep:
        for n in args.sizes:
            sweep += gemm_rows(ctx, n, n, n, SWEEP_PLANS)
    for shape in args.shapes:
        m, n, k = (int(v) for v in shape.split("x"))
        sweep += gemm_rows(ctx, m, n, k, SHAPE_PLANS)
    if sweep:
        print_table(sweep, "GEMM plan sweep")
    rows: list[Row] = []
    for n in args.sizes:
        rows += gemm_rows(ctx, n, n, n)
    big = max(n for n in args.sizes if n <= 4096)
    rows += gemm_rows(ctx, big, big, big, transposed_b=True)
    n = 1 << args.log2_elements
    rows += [add_row(ctx, n), sum_row(ctx, n)]
    os.environ["RUMUS_WGPU_NOVEC"] = "1"
    rows += [add_row(ctx, n, " scalar"), sum_row(ctx, n, " scalar")]
    os.environ.pop("RUMUS_WGPU_NOVEC")
    rows.append(latency_row(ctx))
    for extra in EXTRA_BENCHMARKS:
        rows += extra(ctx)
    stats = ctx.backend.stats(ctx.device)
    pool = ctx.backend.pool_stats(ctx.device)
    print(f"\nstats: {stats}\npool: {pool}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": caps.description, "sweep": [asdict(r) | {"ratio": r.ratio} for r in sweep],
                       "rows": [asdict(r) | {"ratio": r.ratio} for r in rows], "stats": stats, "pool": pool}, f,
                      indent=1)
    print_table(rows, "wgpu vs torch (GPU time; ratio = wgpu / torch, higher is better for wgpu)")


if __name__ == "__main__":
    main()
