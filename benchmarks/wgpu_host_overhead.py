"""Host (CPU/Python) cost per op of the wgpu backend, for small ops where the host dominates.

For each op, three numbers in microseconds per op:

* `core+sync`: N ops (--n-sync) called through the core (`rumus` tensors on wgpu), then one synchronize; the
  whole wall time divided by N, nothing subtracted (includes GPU work, on lavapipe CPU work too).
* `core rec`: only the recording calls of N ops through the core (--n-rec), with N small enough that the
  recorder does not submit in between (it flushes at `max_dispatches`); GPU work is excluded.
* `kernel rec`: the same, calling the backend kernel directly with `TensorArg`s (no core dispatch,
  no autograd, no output allocation by the core): the rumus_wgpu share of the host cost.

Then a 4-byte read-back (one host sync: wall and host CPU us; on lavapipe the "GPU" runs on this process's
threads, so CPU time includes it);
and the MLP 784-256-256-10 Adam training step (benchmarks/wgpu_core.py) in ms per step: whole steps
(`loss.item()` each), and the recording alone (no GPU work); with `--profile` a cProfile of whole steps,
top entries by internal time and the rumus_wgpu entries by cumulative time.

    XDG_RUNTIME_DIR=/tmp PYTHONPATH=.:contracts:backends:conformance \
        python benchmarks/wgpu_host_overhead.py [--reps 5] [--steps 20] [--profile] [--json out.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import per_call_samples  # noqa: E402


def _median_us(fn: Callable[[int], float], n: int, reps: int) -> float:
    fn(n)  # warm-up: compile programs, fill caches and the pool
    return statistics.median(fn(n) for _ in range(reps)) / n * 1e6


class Bench:
    def __init__(self) -> None:
        import rumus as rm

        self.rm = rm
        self.dev = "wgpu:0"
        self.backend = rm._runtime.backend("wgpu")
        from rumus_contracts import Device
        self.device = Device("wgpu", 0)
        self.recorder = self.backend.device(self.device).recorder

    def sync(self) -> None:
        self.backend.synchronize(self.device)

    def per_call(self, call: Callable[[], Any]) -> tuple[int, float]:
        """(dispatches + copies per call, seconds of one call plus its synchronize)."""
        self.sync()
        before = self.recorder.dispatches + self.recorder.copies
        t0 = time.perf_counter()
        call()
        self.sync()
        dt = time.perf_counter() - t0
        return max(1, self.recorder.dispatches + self.recorder.copies - before), dt

    def discard(self) -> None:
        """Drop the pending (recorded, never submitted) batch: its GPU work is not run at all, so
        record-only timings cost no GPU time (ops whose kernels are slow on lavapipe stay cheap)."""
        rec = self.recorder
        rec.cpass = rec.encoder = None
        rec.used = rec.count = 0
        rec.keep = []

    def timed(self, call: Callable[[], Any], n: int, with_sync: bool) -> float:
        """Seconds for n calls (plus the final synchronize when with_sync, else the batch is dropped)."""
        self.sync()
        keep = []
        t0 = time.perf_counter()
        for _ in range(n):
            keep.append(call())
        if with_sync:
            self.sync()
        t1 = time.perf_counter()
        if not with_sync:
            self.discard()
        del keep
        return t1 - t0

    def row(self, name: str, core: Callable[[], Any], kernel: Callable[[], Any], n_sync: int, n_rec: int,
            reps: int) -> dict[str, Any]:
        per, one = self.per_call(core)
        per, one = self.per_call(core)  # the first call compiled the programs
        n_rec = max(1, min(n_rec, (self.recorder.max_dispatches - 1) // per))
        n_sync = max(1, min(n_sync, int(0.3 / one)))  # keep slow (on lavapipe) kernels to ~0.3 s a batch
        return {
            "op": name, "dispatches": per, "n_sync": n_sync,
            "core+sync": _median_us(lambda n: self.timed(core, n, True), n_sync, reps),
            "core rec": _median_us(lambda n: self.timed(core, n, False), n_rec, reps),
            "kernel rec": _median_us(lambda n: self.timed(kernel, n, False), n_rec, reps),
        }


def op_rows(b: Bench, reps: int, n_sync: int, n_rec: int, verbose: bool = False) -> list[dict[str, Any]]:
    rm = b.rm
    from rumus_contracts import TensorArg, contiguous_strides, float32

    rm.manual_seed(0)
    with rm.no_grad():
        a = rm.randn(128, 256, device=b.dev)
        c = rm.randn(128, 256, device=b.dev)
        w = rm.randn(256, 256, device=b.dev)
        p = rm.randn(65536, device=b.dev)
        g = rm.randn(65536, device=b.dev)
        m1 = rm.zeros(65536, device=b.dev)
        m2 = rm.zeros(65536, device=b.dev)
    kt = b.backend.kernels

    def arg(t: Any) -> TensorArg:
        return t._arg  # the core's own view of a tensor

    def empty(shape: tuple[int, ...]) -> TensorArg:
        return TensorArg(b.backend.allocate(b.device, int(np.prod(shape)), float32), shape,
                         contiguous_strides(shape), 0, float32)

    A, C, W, P, G, M1, M2 = (arg(t) for t in (a, c, w, p, g, m1, m2))
    adam_attrs = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
                  "decoupled": False, "step": 3}
    adam = rm.ops.get("adam_step")

    def into_new(op: str, inputs: list[TensorArg], attrs: dict[str, Any], shape: tuple[int, ...] = (128, 256),
                 out_view: Callable[[TensorArg], TensorArg] = lambda o: o) -> Callable[[], Any]:
        """The kernel of `op` alone, writing a fresh output of `shape` (through `out_view`)."""
        def run() -> Any:
            o = empty(shape)
            kt[op]([out_view(o)], inputs, attrs)
            return o
        return run

    k_add = into_new("add", [A, C], {})
    k_relu = into_new("relu", [A], {})
    k_sum = into_new("sum", [A], {"dims": (1,)}, (128,), lambda o: TensorArg(o.buffer, (128, 1), (1, 1), 0, float32))
    k_matmul = into_new("matmul", [A, W], {})
    k_softmax = into_new("softmax", [A], {"dim": 1})

    def k_adam() -> None:
        kt["adam_step"]([], [P, G, M1, M2], adam_attrs)

    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("add [128,256]", lambda: a + c, k_add),
        ("relu [128,256]", lambda: a.relu(), k_relu),
        ("sum dim=1 [128,256]", lambda: a.sum(dim=1), k_sum),
        ("matmul 128x256x256", lambda: a @ w, k_matmul),
        ("softmax dim=1 [128,256]", lambda: rm.nn.functional.softmax(a, dim=1), k_softmax),
        ("adam_step 64K params", lambda: adam(p, g, m1, m2, **adam_attrs), k_adam),
    ]
    rows = []
    with rm.no_grad():
        for name, core, kernel in cases:
            rows.append(b.row(name, core, kernel, n_sync, n_rec, reps))
            if verbose:
                print(f"  {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[-1].items() if k != "op"),
                      flush=True)
    return rows


def _mlp(b: Bench) -> tuple[Callable[[], float], Callable[[], Any]]:
    """(a training step that reads the loss, the same step without the read: recording only)."""
    rm = b.rm
    from rumus import nn
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10)).to(b.dev)
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)
    x, y = rm.randn(128, 784, device=b.dev), rm.randn(128, 10, device=b.dev)
    loss_fn = nn.MSELoss()

    def record() -> Any:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    def step() -> float:
        return float(record().item())
    for _ in range(3):
        step()
    return step, record


def mlp_row(b: Bench, step: Callable[[], float], record: Callable[[], Any], steps: int,
            reps: int) -> dict[str, Any]:
    """ms per MLP step: whole steps (each reads the loss with `.item()`: one host sync per step), and
    the recording of a step alone (its batch is then dropped unsubmitted: host time, no GPU work)."""
    rec = b.recorder
    b.sync()
    d0 = rec.dispatches
    step()
    per = rec.dispatches - d0
    samples = per_call_samples(step, steps, reps)
    rec_samples = []
    for _ in range(reps):
        total = 0.0
        for _ in range(steps):
            b.sync()
            t0 = time.perf_counter()
            loss = record()
            total += time.perf_counter() - t0
            b.discard()
            del loss
        rec_samples.append(total / steps)
    return {"op": "MLP 784-256-256-10 Adam step", "dispatches": per, "ms": statistics.median(samples) * 1e3,
            "record ms": statistics.median(rec_samples) * 1e3}


def sync_rows(b: Bench, reps: int, n: int = 100) -> list[dict[str, Any]]:
    """A 4-byte read-back (what every host sync costs: one submit, one map through wgpu-py's map_sync), wall
    and host CPU us per read. CPU time (process_time) is what other processes' load disturbs least."""
    x = b.rm.ones(1, device=b.dev)
    arg = x._arg
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(reps + 1):  # the first round warms up
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            b.backend.to_numpy(arg)
        wall.append((time.perf_counter() - t0) / n * 1e6)
        cpu.append((time.process_time() - c0) / n * 1e6)
    return [{"op": "sync: 4-byte read-back", "us": statistics.median(wall[1:]), "cpu us": statistics.median(cpu[1:])}]


def profile_step(step: Callable[[], float], steps: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    st.sort_stats("tottime").print_stats(top)
    out2 = io.StringIO()
    pstats.Stats(prof, stream=out2).sort_stats("cumulative").print_stats("rumus_wgpu", top)
    return out.getvalue() + "\n--- cumulative, rumus_wgpu only ---\n" + out2.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (median)")
    parser.add_argument("--n-sync", type=int, default=20, help="ops per timed batch for core+sync")
    parser.add_argument("--n-rec", type=int, default=100, help="ops per timed batch when recording only")
    parser.add_argument("--steps", type=int, default=20, help="MLP steps per timed batch")
    parser.add_argument("--profile", action="store_true", help="cProfile the MLP step")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-ops", action="store_true", help="only the MLP step")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    b = Bench()
    caps = b.backend.capabilities(b.device)
    print(f"wgpu device: {caps.description}")
    rows = [] if args.no_ops else op_rows(b, args.reps, args.n_sync, args.n_rec, verbose=True)
    if rows:
        print(f"\nhost us per op (median of {args.reps})")
        print(f"{'op':28} {'disp':>4} {'core+sync':>10} {'(n)':>4} {'core rec':>9} {'kernel rec':>10}")
        for r in rows:
            print(f"{r['op']:28} {r['dispatches']:4d} {r['core+sync']:10.1f} {r['n_sync']:4d} {r['core rec']:9.1f} "
                  f"{r['kernel rec']:10.1f}")
    print()
    for sync in sync_rows(b, args.reps):
        print(f"{sync['op']}: {sync['us']:.1f} us wall, {sync['cpu us']:.1f} us host CPU (median of {args.reps})")
        rows.append(sync)
    step, record = _mlp(b)
    mlp = mlp_row(b, step, record, args.steps, args.reps)
    print(f"\n{mlp['op']}: {mlp['ms']:.3f} ms/step with .item(), {mlp['record ms']:.3f} ms/step recording only, "
          f"{mlp['dispatches']} dispatches/step")
    rows.append(mlp)
    if args.profile:
        print(profile_step(step, args.steps, args.top))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
