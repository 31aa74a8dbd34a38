"""GPU time per launch of a step, timed as a batch of R launches between two syncs.

One launch per sync charges every row the cost of the sync itself (about 0.28 ms for a lone wgpu
sync on the H200, 0.01 ms for torch's cuda sync): a training step syncs once, so that cost is not a
kernel's. Here R launches (R >= `min_launches`, enough to fill about `target_s`) run between two syncs,
the measured cost of a lone sync is subtracted once per batch, and the rest is divided by R.

Where the device records launches and submits them only at a sync or at a bound (rumus's recorder: its first
`first_batch` dispatches after a sync), a batch's time is host recording and GPU execution in series. For
such a device `gpu_seconds` also times the GPU alone: chunks of launches that fit the first batch are
recorded untimed, then the clock runs from the sync's start (which submits them) to its end, less one lone
sync. Torch launches as it records, so its batch time is already host and GPU overlapped.

An untimed warm-up batch of the same R comes first, so the rumus buffer pool already holds every buffer
the timed batches ask for (the counters must then show no new buffer) and each launch's kernels are
counted (a launch that dispatched nothing would show 0 kernels per launch: skipped or cached).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Timing:
    seconds: float  # GPU time per launch (batch time less one lone sync, over R)
    launches: int  # R
    host_seconds: float  # host time per launch to record the batch (before the sync)
    kernels: float | None  # dispatches per launch (rumus), None where not counted
    new_buffers: int | None  # pool misses during the timed batches (rumus): 0 in a steady state
    gpu_seconds: float | None = None  # GPU time per launch with recording kept out of the clock (record-first)


def lone_sync_cost(sync: Callable[[], object], reps: int = 21) -> float:
    """Median seconds of a sync with nothing queued."""
    sync()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


class LaunchBatches:
    """`time(step)`: per-launch seconds of `step`. `counters()` -> (dispatches, pool misses) so far, or None."""

    def __init__(self, sync: Callable[[], object], counters: Callable[[], tuple[int, int]] | None = None,
                 target_s: float = 2e-3, min_launches: int = 10, max_launches: int = 4000, reps: int = 5,
                 max_batch_bytes: int = 16 << 30, first_batch: int | None = None) -> None:
        self.sync, self.counters, self.first_batch = sync, counters, first_batch
        self.target_s, self.min_launches, self.max_launches = target_s, min_launches, max_launches
        self.reps, self.max_batch_bytes = reps, max_batch_bytes
        self.idle = lone_sync_cost(sync)

    def _batch(self, step: Callable[[], object], n: int) -> tuple[float, float]:
        """(seconds to record n launches, seconds until they finished), less one lone sync."""
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        t1 = time.perf_counter()
        self.sync()
        t2 = time.perf_counter()
        return t1 - t0, max(t2 - t0 - self.idle, 0.0)

    def launches_for(self, step: Callable[[], object], bytes_per_launch: int) -> int:
        step()
        self.sync()
        _, probe = self._batch(step, self.min_launches)
        per = max(probe / self.min_launches, 1e-7)
        n = min(self.max_launches, max(self.min_launches, math.ceil(self.target_s / per)))
        if bytes_per_launch > 0:  # the outputs of a batch stay in the pool: keep them within memory
            n = min(n, max(self.min_launches, self.max_batch_bytes // bytes_per_launch))
        return n

    def time(self, step: Callable[[], object], bytes_per_launch: int = 0) -> Timing:
        n = self.launches_for(step, bytes_per_launch)
        self._batch(step, n)  # the pool now holds what a batch of n needs
        before = self.counters() if self.counters else None
        host, gpu = [], []
        for _ in range(self.reps):
            h, g = self._batch(step, n)
            host.append(h / n)
            gpu.append(g / n)
        kernels = misses = None
        if before is not None and self.counters is not None:
            after = self.counters()
            kernels = (after[0] - before[0]) / (n * self.reps)
            misses = after[1] - before[1]
        gpu_only = None
        if self.first_batch is not None:
            gpu_only = self._recorded_first(step, n, kernels or 1.0, bytes_per_launch)
        return Timing(statistics.median(gpu), n, statistics.median(host), kernels, misses, gpu_only)

    def _recorded_first(self, step: Callable[[], object], n: int, kernels: float, bytes_per_launch: int) -> float:
        """GPU seconds per launch: chunks that fit the recorder's first batch recorded, then synced on the clock."""
        assert self.first_batch is not None
        chunk = max(1, min(n, int(self.first_batch // max(kernels, 1.0))))
        if bytes_per_launch > 0:
            chunk = max(1, min(chunk, self.max_batch_bytes // bytes_per_launch))
        chunks = (n + chunk - 1) // chunk
        samples = []
        for rep in range(self.reps + 1):  # the first round is a warm-up (the pool learns a chunk's buffers)
            total = 0.0
            for _ in range(chunks):
                for _ in range(chunk):
                    step()
                t0 = time.perf_counter()
                self.sync()
                total += max(time.perf_counter() - t0 - self.idle, 0.0)
            if rep:
                samples.append(total / (chunks * chunk))
        return statistics.median(samples)
