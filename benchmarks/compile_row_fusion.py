"""rm.compile fusing elementwise chains into row ops: fused vs the same compile without it, one run.

Steps (forward under no_grad, then a training step of the norm where the sum must be kept for the
backward):
  attention   softmax(q @ k.T * scale + causal mask)   q, k: [B, H, T, 64]
  log_softmax log_softmax(logits / temperature)         [B * T, V]
  layer_norm  layer_norm(x + residual)                  [B * T, d]
  rms_norm    rms_norm(x + residual)                    [B * T, d]
  ln train    layer_norm(x + residual), loss, backward  (x + residual written by the fused kernel)
  transformer compile_steps.py's transformer training step (its residual adds fuse into the next
              layer_norm; --small: its small one), each variant its own model and optimizer
Columns: ms per call of rm.compile(fn) (chains fused into the row op), rm.compile(fn, fuse_rows=False)
(the chain one fused elementwise kernel, then the row op), rm.compile(fn, fuse=False) (every kernel
apart), and the fused call over the fuse_rows=False one (the median of the per-round ratios). Calls are timed
interleaved (one of each per round, each followed by a device sync), medians over the rounds.

    python benchmarks/compile_row_fusion.py                                          # CPU
    XDG_RUNTIME_DIR=/tmp RUMUS_BACKEND=wgpu python benchmarks/compile_row_fusion.py --device wgpu:0 --small
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table  # noqa: E402

import rumus as rm  # noqa: E402
from rumus.nn import functional as F  # noqa: E402

VARIANTS = {"fused": {}, "fuse_rows=False": {"fuse_rows": False}, "fuse=False": {"fuse": False}}


def _steps(device: str, small: bool) -> dict[str, tuple[Callable[..., Any], list[rm.Tensor]]]:
    rng = np.random.default_rng(0)
    b, h, t, d, v = (2, 4, 64, 128, 1024) if small else (8, 8, 128, 512, 8192)

    def rand(*shape: int, grad: bool = False) -> rm.Tensor:
        return rm.tensor(rng.standard_normal(shape).astype(np.float32), device=device, requires_grad=grad)
    mask = rm.tensor(np.triu(np.full((t, t), -1e9, np.float32), 1), device=device)
    w, bias = rand(d), rand(d)
    gamma, beta = rand(d, grad=True), rand(d, grad=True)

    def attention(q: rm.Tensor, k: rm.Tensor) -> rm.Tensor:
        with rm.no_grad():
            return rm.softmax(q @ k.transpose(-1, -2) * 0.125 + mask, dim=-1)

    def log_softmax(z: rm.Tensor) -> rm.Tensor:
        with rm.no_grad():
            return rm.log_softmax(z / 0.8, dim=-1)

    def layer_norm(x: rm.Tensor, r: rm.Tensor) -> rm.Tensor:
        with rm.no_grad():
            return F.layer_norm(x + r, (d,), w, bias)

    def rms_norm(x: rm.Tensor, r: rm.Tensor) -> rm.Tensor:
        with rm.no_grad():
            return F.rms_norm(x + r, (d,), w)

    opt = rm.optim.SGD([gamma, beta], lr=0.0)  # its zero_grad: a host region, so every call replays

    def ln_train(x: rm.Tensor, r: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        y = F.layer_norm(x + r, (d,), gamma, beta)
        loss = (y * r).sum()
        loss.backward()
        return loss
    rows = b * t
    return {"attention": (attention, [rand(b, h, t, 64), rand(b, h, t, 64)]),
            "log_softmax": (log_softmax, [rand(rows, v // 4 if small else v)]),
            "layer_norm": (layer_norm, [rand(rows, d), rand(rows, d)]),
            "rms_norm": (rms_norm, [rand(rows, d), rand(rows, d)]),
            "ln train": (ln_train, [rand(rows, d), rand(rows, d)])}


def _transformer(device: str, small: bool) -> dict[str, dict[str, Any]]:
    import compile_steps
    return {label: compile_steps.build("transformer", device, "cpu", small, **kw) for label, kw in VARIANTS.items()}


def _kernels(f: Any) -> int:
    return int(f.stats()["kernels"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--small", action="store_true", help="smaller shapes (lavapipe)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--only", default="", help="comma-separated step names")
    args = ap.parse_args()
    rows = []
    for name, (fn, inputs) in _steps(args.device, args.small).items():
        if args.only and name not in args.only.split(","):
            continue
        compiled = {label: rm.compile(fn, **kw) for label, kw in VARIANTS.items()}
        for f in compiled.values():
            for _ in range(3):
                f(*inputs)
            assert f.replays, f"{name}: not replayed"
        rm.synchronize(args.device)
        want = fn(*inputs).numpy()
        for label, f in compiled.items():  # the benchmark times correct programs only
            np.testing.assert_allclose(f(*inputs).numpy(), want, rtol=1e-5, atol=1e-5, err_msg=f"{name} {label}")
        times: dict[str, list[float]] = {label: [] for label in compiled}
        for _ in range(args.rounds):
            for label, f in compiled.items():
                t0 = time.perf_counter()
                f(*inputs)
                rm.synchronize(args.device)
                times[label].append(time.perf_counter() - t0)
        ms = {label: statistics.median(ts) * 1e3 for label, ts in times.items()}
        kernels = "/".join(str(_kernels(f)) for f in compiled.values())
        # the ratio within each round (the calls of one round see about the same machine load), median
        paired = statistics.median(a / b for a, b in zip(times["fused"], times["fuse_rows=False"]))
        rows.append((name, kernels, *(f"{ms[label]:.3f}" for label in compiled), f"{paired:.2f}"))
    if not args.only or "transformer" in args.only.split(","):
        built = _transformer(args.device, args.small)
        calls = {label: b["compiled"] for label, b in built.items()}
        for f in calls.values():
            for _ in range(3):
                f().item()
        assert all(b["compiled_fn"].replays for b in built.values()), "transformer: not replayed"
        times = {label: [] for label in calls}
        for _ in range(max(args.rounds // 3, 5)):
            for label, f in calls.items():
                t0 = time.perf_counter()
                f().item()
                times[label].append(time.perf_counter() - t0)
        ms = {label: statistics.median(ts) * 1e3 for label, ts in times.items()}
        paired = statistics.median(a / b for a, b in zip(times["fused"], times["fuse_rows=False"]))
        kernels = "/".join(str(_kernels(b["compiled_fn"])) for b in built.values())
        rows.append(("transformer", kernels, *(f"{ms[label]:.3f}" for label in calls), f"{paired:.2f}"))
    print(f"device {args.device}, {'small' if args.small else 'full'} shapes, {args.rounds} rounds, medians (ms)")
    print(table(rows, ("step", "kernels", *(f"{label} ms" for label in VARIANTS), "fused / fuse_rows=False")))


if __name__ == "__main__":
    main()
