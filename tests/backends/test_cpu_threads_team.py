"""The kernels' thread pool stays put between kernels of different sizes (csrc/pool.c).

libgomp made the surplus threads of its pool exit when a parallel region was smaller than the one before,
and created them again for the next larger one, so kernels split 2, 3 or 4 ways by their size, one after
the other, paid thread creation on almost every op. The backend's own pool never ends a worker: a run of
such kernels creates no thread after the first."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("rumus_cpu._kernels")

from thread_count_runs import run_threads_script  # noqa: E402

SCRIPT = r"""
import json, os
import numpy as np
import rumus as rm
from rumus_cpu import threads
rng = np.random.default_rng(0)
small = rm.tensor(rng.standard_normal(140_000).astype(np.float32))   # split 4 ways (32K per thread)
mid = rm.tensor(rng.standard_normal(70_000).astype(np.float32))      # split 2 ways
big = rm.tensor(rng.standard_normal(1 << 21).astype(np.float32))     # the whole budget
x, w = rm.randn(8, 16, 20, 20), rm.randn(32, 16, 3, 3)
def tids():
    return set(os.listdir("/proc/self/task"))
def ops():
    (big + 1.0).exp(); (mid * 2.0).exp(); (small + 3.0).exp(); (mid + 1.0).sum()
    rm.nn.functional.conv2d(x, w, padding=1); (mid - 1.0).exp()
ops()
seen = tids()
before = len(seen)
for _ in range(40):
    ops()
    seen |= tids()
print(json.dumps({"before": before, "new": len(seen) - before, "threads": threads.get_num_threads()}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc/self/task")
def test_kernels_of_different_sizes_create_no_threads() -> None:
    got = run_threads_script(SCRIPT, 4)
    assert got["threads"] == 4
    # 40 rounds of 2-, 4- and 1-way kernels: before the fix each round re-created 2 threads (80+ new ids)
    assert got["new"] <= 2, got
