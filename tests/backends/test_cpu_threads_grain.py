"""Kernels below their class's grain stay on the calling thread (csrc/runtime.c, rumus_threads_for_grain):
the kernels' other threads are never woken for them. A woken worker goes back to sleep afterwards, which
counts one voluntary context switch in /proc/self/task/TID/status, so a run of small ops must leave every
worker's count unchanged, and a large op (the control) must change it."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("rumus_cpu._kernels")

from thread_count_runs import run_threads_script  # noqa: E402

SCRIPT = r"""
import json, os, threading, time
import numpy as np
import rumus as rm
from rumus.nn import functional as F
from rumus_cpu import threads
rng = np.random.default_rng(0)
def t(*shape):
    return rm.tensor(rng.standard_normal(shape).astype(np.float32))
def switches():
    me = str(threading.get_native_id())
    out = {}
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                out[tid] = next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches"))
        except (OSError, StopIteration):
            pass
    return out
a, b = t(128, 256), t(128, 256)          # 32K elements: under the elementwise grain (65536)
s = t(8, 1024)                            # 8K elements: under the row grain (16384)
logits, target = t(64, 100), rm.tensor(rng.integers(0, 100, 64))
m1, m2 = t(32, 64), t(64, 128)            # 0.26M multiply-adds: under the BLAS grain (0.5M)
bm1, bm2 = t(4, 32, 32), t(4, 32, 32)     # 4 products, 131K multiply-adds
q = t(1, 2, 16, 16)                       # flash attention, 8K multiply-adds: under its grain (256K)
big1, big2 = t(512, 512), t(512, 512)     # 134M multiply-adds: every thread gets blocks (the control)
def small():
    a + b; (a * b).relu(); F.softmax(s, dim=-1); F.log_softmax(s, dim=-1); F.cross_entropy(logits, target)
    m1 @ m2; bm1 @ bm2; F.scaled_dot_product_attention(q, q, q); a.sum()
small(); big1 @ big2                      # every thread exists now
time.sleep(0.3)                           # ... and has gone to sleep (libgomp spins ~50 us first)
before = switches()
for _ in range(300):
    small()
after_small = switches()
big1 @ big2
time.sleep(0.1)
after_big = switches()
woken_small = sum(after_small.get(k, v) != v for k, v in before.items())
woken_big = sum(after_big.get(k, v) != after_small.get(k, v) for k, v in before.items())
print(json.dumps({"threads": threads.get_num_threads(), "workers": len(before),
                  "woken_small": woken_small, "woken_big": woken_big}))
"""


@pytest.mark.timing
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc/self/task")
def test_small_kernels_of_every_class_wake_no_thread() -> None:
    got = run_threads_script(SCRIPT, 3)
    assert got["threads"] == 3 and got["workers"] >= 2, got
    assert got["woken_big"] >= 2, got  # the control: a large product does wake the kernels' threads
    assert got["woken_small"] == 0, got


def test_the_policy_names_every_grain() -> None:
    from rumus_cpu import threads
    p = threads.policy()
    assert p["grains"] == {"elementwise elements": p["grain"], "row elements": 16384,
                           "BLAS multiply-adds": 1 << 19, "loop multiply-adds": 1 << 18}
    assert "row kernels 16384" in threads.describe()
