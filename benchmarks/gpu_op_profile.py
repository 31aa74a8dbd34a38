"""Where the GPU LM step's time goes, per op: every kernel of the backend runs between two synchronizations.

    RUMUS_WGPU_IMPL=dawn python3 benchmarks/gpu_op_profile.py --autocast float16     # the LM step of gpu_scale.py
    python3 benchmarks/gpu_op_profile.py --small                                    # a smoke run (lavapipe)

The model, data and optimizer are gpu_scale.py's LM step (benchmarks/nn_transformer.py's RumusLM). The
backend's kernel table is wrapped before the first op, so every kernel call (the planned paths keep the
wrapped one) waits for the work queued before it, then runs and waits again; the time between is charged
to the op's name. One idle synchronization's cost (measured here) is taken off each call. A step with
the wrappers switched off is timed too: the rows add up to more than it, since each kernel now runs alone
(no overlap between consecutive dispatches), which is what makes a per-op figure possible at all.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table  # noqa: E402
from gpu_scale import FULL, SMALL  # noqa: E402
from nn_transformer import RumusLM, _backward_and_step  # noqa: E402

import rumus as rm  # noqa: E402
from rumus.nn import functional as F  # noqa: E402


def _wrap(sync: Callable[[], None], on: list[bool], charged: dict[str, list[float]]) -> None:
    """Every kernel the dispatcher looks up from now on (rumus._runtime.kernel) comes back timed."""
    from rumus import _runtime
    find = _runtime.kernel

    def kernel(op: str, backend_obj: Any, dtype: Any) -> Any:
        k = find(op, backend_obj, dtype)

        def timed(outputs: Any, inputs: Any, attrs: Any) -> Any:
            if not on[0]:
                return k(outputs, inputs, attrs)
            sync()
            t0 = time.perf_counter()
            out = k(outputs, inputs, attrs)
            sync()
            charged[op].append(time.perf_counter() - t0)
            return out
        return timed
    _runtime.kernel = kernel  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--device", default="wgpu:0")
    ap.add_argument("--autocast", default=None, choices=["float16", "bfloat16"])
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
    c = SMALL if args.small else FULL
    dev = args.device
    device = rm.device(dev)
    from rumus._runtime import backend as backend_of  # the backend object behind the device
    backend = backend_of(device.backend)

    def sync() -> None:
        backend.synchronize(device)

    on = [False]
    charged: dict[str, list[float]] = defaultdict(list)
    _wrap(sync, on, charged)  # before the first op: no kernel is cached unwrapped

    rng = np.random.default_rng(0)
    idx = rm.tensor(rng.integers(0, c["vocab"], (c["batch"], c["seq"])), device=dev)
    tgt = rm.tensor(rng.integers(0, c["vocab"], c["batch"] * c["seq"]), device=dev)
    pos = rm.tensor(np.arange(c["seq"]), device=dev)
    rm.manual_seed(0)
    model = RumusLM(c).to(dev).train()
    opt = rm.optim.AdamW(model.parameters(), lr=c["lr"])
    scaler = rm.amp.GradScaler() if args.autocast == "float16" else None

    def step() -> float:
        if args.autocast is None:
            loss = F.cross_entropy(model(idx, pos).reshape(-1, c["vocab"]), tgt)
            opt.zero_grad()
            return _backward_and_step(loss, opt, None)
        with rm.autocast(dev.split(":")[0], dtype=getattr(rm, args.autocast)):
            loss = F.cross_entropy(model(idx, pos).reshape(-1, c["vocab"]), tgt)
        opt.zero_grad()
        return _backward_and_step(loss, opt, scaler)

    for _ in range(2):
        step()
    plain = []
    for _ in range(3):
        sync()
        t0 = time.perf_counter()
        step()
        plain.append(time.perf_counter() - t0)
    idle = []
    for _ in range(200):
        t0 = time.perf_counter()
        sync()
        idle.append(time.perf_counter() - t0)
    idle_s = statistics.median(idle)
    on[0] = True
    sync()
    t0 = time.perf_counter()
    loss = step()
    profiled = time.perf_counter() - t0
    on[0] = False

    rows = sorted(((name, len(ts), max(0.0, sum(ts) - idle_s * len(ts))) for name, ts in charged.items()),
                  key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    print(f"LM step {'under autocast ' + args.autocast if args.autocast else 'float32'}: {c}")
    print(f"step without the wrappers: median {statistics.median(plain) * 1e3:.1f} ms of 3; the profiled step "
          f"{profiled * 1e3:.1f} ms (loss {loss:.4f}); one idle sync {idle_s * 1e6:.1f} us, taken off each call")
    out = [(n, str(k), f"{t * 1e3:.2f}", f"{t / total * 100:.1f}%", f"{t / k * 1e6:.0f}")
           for n, k, t in rows[:args.top]]
    print(table(out, ("op", "calls", "ms", "share", "us/call")))
    print(f"kernels in all: {sum(r[1] for r in rows)} calls, {total * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
