"""One Adam/AdamW step under rm.amp.GradScaler over a GPT-ish parameter set (52 tensors): kernel calls,
GPU dispatches and wall time per optimizer step (issue 13: the fused adam_step_dev_ against the core-op
update with a where-undo it replaced).

    python benchmarks/adam_scaled_step.py                                  # cpu, d=256 (3.4M parameters)
    python benchmarks/adam_scaled_step.py --device wgpu:0 --d 64 --steps 3 # lavapipe: dispatches per step
    python benchmarks/adam_scaled_step.py --device wgpu:0 --d 1024         # the H200: GPT-scale tensors

A step is scaler.step(opt) + scaler.update() (unscale_ and its inf check included; every --inf-every-th
step has an injected inf, so it is skipped), timed between two synchronizes; the gradients are set
before the timer starts. --torch adds torch.optim with torch.amp.GradScaler on --torch-device.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from typing import Any

import numpy as np


def gpt_shapes(d: int, layers: int = 4, vocab: int = 1000, ctx: int = 128) -> list[tuple[int, ...]]:
    """Token and position embeddings, per layer two LayerNorms, qkv, projection and the MLP (weights and
    biases), a final LayerNorm: 4 + 12 * layers tensors."""
    out: list[tuple[int, ...]] = [(vocab, d), (ctx, d)]
    for _ in range(layers):
        out += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return out + [(d,), (d,)]


def _count_kernels() -> Counter[str]:
    """Every kernel call from here on, by op (installed before the first op runs, so each lookup is wrapped)."""
    from rumus import _runtime
    calls: Counter[str] = Counter()
    original = _runtime.kernel

    def counted_lookup(op: str, backend_obj: Any, dtype: Any) -> Any:
        inner = original(op, backend_obj, dtype)

        def counted(out_args: Any, in_args: Any, attrs: Any) -> Any:
            calls[op] += 1
            return inner(out_args, in_args, attrs)
        return counted
    _runtime.kernel = counted_lookup  # type: ignore[assignment]
    return calls


def rumus_step(args: argparse.Namespace) -> dict[str, float]:
    calls = _count_kernels()
    import rumus as rm
    rng = np.random.default_rng(0)
    params = [rm.tensor(rng.standard_normal(s) * 0.02, dtype=rm.float32, device=args.device).requires_grad_(True)
              for s in gpt_shapes(args.d)]
    grads = [rng.standard_normal(s).astype(np.float32) for s in gpt_shapes(args.d)]
    opt = getattr(rm.optim, args.kind)(params, lr=1e-3, amsgrad=args.amsgrad)
    scaler = rm.amp.GradScaler(init_scale=2.0 ** 10, growth_interval=10 ** 6)
    scaler.scale(rm.zeros((), device=args.device))  # the scale tensor exists before the first step
    backend = rm._runtime.backend(args.device.split(":")[0])
    wgpu = args.device.startswith("wgpu")
    times, ops, dispatches = [], [], []
    for k in range(args.warmup + args.steps):
        for p, g in zip(params, grads):
            p.grad = rm.tensor(g * 1024.0, device=args.device)
        if args.inf_every and k % args.inf_every == args.inf_every - 1:
            params[0].grad[0, 0] = float("inf")
        rm.synchronize(args.device)
        before = sum(calls.values())
        d0 = backend.stats(0)["dispatches"] if wgpu else 0
        t0 = time.perf_counter()
        scaler.step(opt)
        scaler.update()
        rm.synchronize(args.device)
        if k >= args.warmup:
            times.append(time.perf_counter() - t0)
            ops.append(sum(calls.values()) - before)
            dispatches.append(backend.stats(0)["dispatches"] - d0 if wgpu else 0)
    last = dict(calls)
    print(f"kernel calls of the last run by op: {sorted(last.items(), key=lambda kv: -kv[1])[:8]}")
    return {"ms": statistics.median(times) * 1e3, "ops": statistics.median(ops),
            "dispatches": statistics.median(dispatches), "params": len(params),
            "numel": sum(int(np.prod(s)) for s in gpt_shapes(args.d))}


def torch_step(args: argparse.Namespace) -> float:
    import torch
    dev = args.torch_device
    shapes = gpt_shapes(args.d)
    params = [torch.nn.Parameter(torch.randn(s, device=dev) * 0.02) for s in shapes]
    grads = [torch.randn(s, device=dev) * 1024.0 for s in shapes]
    opt = getattr(torch.optim, args.kind)(params, lr=1e-3, amsgrad=args.amsgrad)
    scaler = torch.amp.GradScaler(dev.split(":")[0], init_scale=2.0 ** 10, growth_interval=10 ** 6)
    scaler.scale(torch.zeros((), device=dev))
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    times = []
    for k in range(args.warmup + args.steps):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        sync()
        t0 = time.perf_counter()
        scaler.step(opt)
        scaler.update()
        sync()
        if k >= args.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--d", type=int, default=256, help="model width (the tensors' sizes; their count is fixed)")
    ap.add_argument("--kind", default="AdamW", choices=["Adam", "AdamW"])
    ap.add_argument("--amsgrad", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--inf-every", type=int, default=0, help="inject an inf every N-th step (0: never)")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--torch-device", default="cpu")
    args = ap.parse_args()
    res = rumus_step(args)
    print(f"{args.kind}{' amsgrad' if args.amsgrad else ''} under GradScaler, {res['params']} tensors "
          f"({res['numel'] / 1e6:.2f}M values) on {args.device}: {res['ms']:.2f} ms per step, "
          f"{res['ops']:.0f} kernel calls per step" + (f", {res['dispatches']:.0f} dispatches per step"
                                                        if args.device.startswith("wgpu") else ""))
    if args.torch:
        print(f"torch {args.kind} + torch.amp.GradScaler on {args.torch_device}: {torch_step(args):.2f} ms per step")


if __name__ == "__main__":
    main()
