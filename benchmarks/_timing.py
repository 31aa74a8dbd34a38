"""Shared timing helper for the benchmark scripts: best-of-N medians, same process, same inputs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def bench(fn: Callable[[], object], min_time: float = 0.3, repeats: int = 5) -> float:
    """Seconds per call: the median of `repeats` timed batches, each at least `min_time` long."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / repeats or n > 1 << 24:
            break
        n *= 2
    return statistics.median(per_call_samples(fn, n, repeats))


def per_call_samples(fn: Callable[[], object], calls: int, repeats: int) -> list[float]:
    """Seconds per call of `repeats` timed batches of `calls` calls each."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return samples


def median_synced(step: Callable[[], object], sync: Callable[[], object], reps: int) -> float:
    """Seconds per step on an asynchronous device: the median of `reps` steps, each followed by `sync`,
    after one untimed warm-up step."""
    step()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join([line, sep, *body])


def cuda_torch_fp32() -> Any:
    """torch when it has CUDA, with TF32 off (plain fp32, the precision RUMUS's WGSL computes in); else None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch
