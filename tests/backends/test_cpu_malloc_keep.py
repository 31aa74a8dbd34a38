"""Freed buffers stay in the process for the next step (csrc/runtime.c, rumus_malloc_keep).

Every op writes a fresh numpy buffer; with glibc's defaults the large ones went back to the kernel on free
and every page of the next step's outputs page-faulted again (the CNN step's conv bias add faulted on all
784 pages of its output every step). With the policy in force a warm step takes (almost) no page faults;
with it switched off (RUMUS_MALLOC_KEEP_MB=0) the same step takes hundreds, which shows the test measures
what it claims."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytest.importorskip("rumus_cpu._kernels")

SCRIPT = r"""
import json, resource
import numpy as np
import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus_cpu import threads
rm.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(16 * 14 * 14, 10))
opt = rm.optim.Adam(model.parameters(), lr=1e-3)
x = rm.tensor(np.random.default_rng(0).standard_normal((64, 1, 28, 28)).astype(np.float32))
y = rm.tensor(np.arange(64) % 10)
def step():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
for _ in range(3):
    step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 5
print(json.dumps({"faults": faults, "malloc": threads.policy()["malloc"]}))
"""


def _run(**env: str) -> dict[str, object]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    full.update({"RUMUS_NUM_THREADS": "1", "RUMUS_BACKEND": "cpu", **env})
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=full, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_a_warm_step_takes_no_page_faults_and_the_control_does() -> None:
    kept = _run()
    assert kept["malloc"].startswith("heap up to 32 MiB buffers, 256 MiB kept free"), kept  # type: ignore[union-attr]
    off = _run(RUMUS_MALLOC_KEEP_MB="0")
    assert off["malloc"] == "glibc's defaults", off
    # the step's outputs are ~6 MiB (1600 pages); glibc's defaults fault on a large share of them each step
    assert float(off["faults"]) > 300, off  # type: ignore[arg-type]
    assert float(kept["faults"]) < 30, kept  # type: ignore[arg-type]


def test_the_users_glibc_setting_wins() -> None:
    got = _run(MALLOC_TRIM_THRESHOLD_="131072")
    assert got["malloc"] == "as set by the user (MALLOC_*_THRESHOLD_)", got


def test_the_policy_is_in_rumus_info() -> None:
    from rumus_cpu import threads
    assert "malloc: " in threads.describe()
