"""Where a training step spends its time: kernel time per op (and shape) against the whole step.

    RUMUS_NUM_THREADS=16 python benchmarks/op_profile.py --steps 50        # MLP and CNN steps on the CPU
    RUMUS_NUM_THREADS=16 python benchmarks/op_profile.py --torch           # torch CPU's profiler, same steps
    python benchmarks/op_profile.py --device wgpu:0 --models lm --steps 2  # GPT-scale LM step, GPU time per op

Every kernel the dispatcher looks up is wrapped in a timer (rumus._runtime.kernel), so the table's rows are
the kernels' own wall time; "outside kernels" is the rest of the step (Python dispatch, autograd, the
optimizer's host code). On a GPU device each kernel is followed by a synchronize, and the cost of an empty
synchronize (measured first) is subtracted, so a row approximates the kernel's GPU time (plus its encode).
torch's profiler gives the same split for torch CPU at the same thread count.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _install_timers(sync: Callable[[], object] | None, repeat: int = 1) -> dict[tuple[str, str], list[float]]:
    from rumus import _runtime
    idle = 0.0
    if sync is not None:  # the cost of a synchronize with nothing queued, subtracted from every row
        sync()
        t0 = time.perf_counter()
        for _ in range(20):
            sync()
        idle = (time.perf_counter() - t0) / 20
    # per (op, shape): seconds, calls, minor page faults (a fresh output buffer the kernel touches first)
    stats: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    original = _runtime.kernel

    def timed_lookup(op: str, backend_obj: Any, dtype: Any) -> Any:
        inner = original(op, backend_obj, dtype)

        def timed(out_args: Any, in_args: Any, attrs: Any) -> Any:
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            if repeat > 1 and sync is not None:
                # the step's own call, then `repeat` more launches of the same kernel between two syncs:
                # the row is GPU time per launch with the sync cost spread over the batch (in-place kernels
                # apply again: the profile's numbers, not the step's results, are what this mode is for)
                res = inner(out_args, in_args, attrs)
                sync()
                t0 = time.perf_counter()
                for _ in range(repeat):
                    inner(out_args, in_args, attrs)
                sync()
                t1 = time.perf_counter()
                t1 = t0 + (t1 - t0 - idle) / repeat + idle
            else:
                t0 = time.perf_counter()
                res = inner(out_args, in_args, attrs)
                if sync is not None:
                    sync()
                t1 = time.perf_counter()
            shape = "x".join(str(d) for d in in_args[0].shape) if in_args else "-"
            entry = stats[(op, shape)]
            entry[0] += t1 - t0 - idle
            entry[1] += 1
            entry[2] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            return res
        return timed
    _runtime.kernel = timed_lookup  # type: ignore[assignment]
    return stats


def _lm_step(device: str, autocast: str | None = None) -> Callable[[], object]:
    import numpy as np

    import rumus as rm
    from rumus.nn import functional as F
    sys.path.insert(0, HERE)
    import nn_transformer
    from gpu_scale import FULL as c
    rng = np.random.default_rng(0)
    rm.manual_seed(0)
    model = nn_transformer.RumusLM(c).to(device).train()
    opt = rm.optim.AdamW(model.parameters(), lr=c["lr"])
    idx = rm.tensor(rng.integers(0, c["vocab"], (c["batch"], c["seq"])), device=device)
    tgt = rm.tensor(rng.integers(0, c["vocab"], c["batch"] * c["seq"]), device=device)
    pos = rm.tensor(np.arange(c["seq"]), device=device)

    def step() -> None:
        opt.zero_grad()
        if autocast is None:
            F.cross_entropy(model(idx, pos).reshape(-1, c["vocab"]), tgt).backward()
        else:  # no GradScaler: the kernels of the autocast forward and backward are what this profiles
            with rm.autocast(device.split(":")[0], dtype=getattr(rm, autocast)):
                loss = F.cross_entropy(model(idx, pos).reshape(-1, c["vocab"]), tgt)
            loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def _rumus_steps(device: str, models: list[str], autocast: str | None = None) -> dict[str, Callable[[], object]]:
    import rumus as rm
    from rumus import nn
    from rumus.nn import functional as F
    sys.path.insert(0, HERE)
    import nn_cnn
    if "lm" in models:
        return {"lm": _lm_step(device, autocast)}
    rm.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    mlp = mlp.to(device)
    opt = rm.optim.Adam(mlp.parameters(), lr=1e-3)
    mx, my = rm.randn(128, 784, device=device), rm.randn(128, 10, device=device)

    def mlp_step() -> None:
        opt.zero_grad()
        F.mse_loss(mlp(mx), my).backward()
        opt.step()
    cnn_step, _ = nn_cnn._models(64, rm.device(device), "cpu")
    return {"mlp": mlp_step, "cnn": cnn_step}


def _torch_steps() -> dict[str, Callable[[], object]]:
    import torch
    sys.path.insert(0, HERE)
    import _torch_small_models
    mlp_step = _torch_small_models.torch_mlp_step()
    cnn_step = _torch_small_models.torch_cnn_step(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    return {"mlp": mlp_step, "cnn": cnn_step}


def profile_rumus(device: str, models: list[str], steps: int, top: int, autocast: str | None = None,
                  repeat: int = 1) -> None:
    import rumus as rm
    sync = None if device == "cpu" else (lambda: rm.synchronize(device))
    stats = _install_timers(sync, repeat)
    fns = _rumus_steps(device, models, autocast)
    for name in models:
        fn = fns[name]
        for _ in range(2 if name == "lm" else 5):
            fn()
        if sync is not None:
            sync()
        stats.clear()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        if sync is not None:
            sync()
        step_ms = (time.perf_counter() - t0) / steps * 1e3
        kernel_ms = sum(v[0] for v in stats.values()) / steps * 1e3
        calls = sum(v[1] for v in stats.values()) / steps
        print(f"\n## rumus {name} step: {step_ms:.3f} ms, kernels {kernel_ms:.3f} ms in {calls:.0f} calls, "
              f"outside kernels {step_ms - kernel_ms:.3f} ms")
        print("| op | first input shape | calls/step | ms/step | page faults/step |\n|---|---|---|---|---|")
        for (op, shape), (t, n, f) in sorted(stats.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"| {op} | {shape} | {n / steps:.0f} | {t / steps * 1e3:.4f} | {f / steps:.0f} |")


def profile_torch(models: list[str], steps: int, top: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    fns = _torch_steps()
    for name in models:
        fn = fns[name]
        for _ in range(5):
            fn()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        step_ms = (time.perf_counter() - t0) / steps * 1e3
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                fn()
        print(f"\n## torch {name} step ({torch.get_num_threads()} threads): {step_ms:.3f} ms")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="rumus device (cpu, wgpu:0)")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn", "lm"],
                    help="lm: the GPT-scale LM step of benchmarks/gpu_scale.py (alone)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--torch", action="store_true", help="profile torch CPU instead (same process count)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="GPU: time each kernel as this many launches between two syncs (not one launch + sync); "
                         "the step column then includes the repeats, read the per-kernel rows")
    ap.add_argument("--autocast", default=None, choices=["float16", "bfloat16"], help="the lm step under autocast")
    args = ap.parse_args()
    if args.torch:
        import torch
        torch.set_num_threads(int(os.environ.get("RUMUS_NUM_THREADS", os.cpu_count() or 1)))
        profile_torch(args.models, args.steps, args.top)
    else:
        os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
        profile_rumus(args.device, args.models, args.steps, args.top, args.autocast, args.repeat)


if __name__ == "__main__":
    main()
