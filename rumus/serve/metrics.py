"""Prometheus text-format metrics, written by hand (no client library): gauges are read when scraped,
histograms accumulate observations in cumulative buckets."""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Sequence

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.name, self.help, self.buckets = name, help_text, tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum, self.count = 0.0, 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self.counts[bisect.bisect_left(self.buckets, value)] += 1
            self.sum += value
            self.count += 1

    def render(self) -> str:
        with self._lock:
            lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
            running = 0
            for le, c in zip((*map(repr, self.buckets), "+Inf"), self.counts):
                running += c
                lines.append(f'{self.name}_bucket{{le="{le}"}} {running}')
            lines += [f"{self.name}_sum {self.sum!r}", f"{self.name}_count {self.count}"]
        return "\n".join(lines)


class TokenRate:
    """Tokens per second over the last `window` seconds."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self._events: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def add(self, n: int, at: float | None = None) -> None:
        with self._lock:
            self._events.append((time.monotonic() if at is None else at, n))

    def rate(self) -> float:
        now = time.monotonic()
        with self._lock:
            while self._events and self._events[0][0] < now - self.window:
                self._events.popleft()
            return sum(n for _, n in self._events) / self.window


def gauge(name: str, help_text: str, value: float, kind: str = "gauge") -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n{name} {value!r}"
