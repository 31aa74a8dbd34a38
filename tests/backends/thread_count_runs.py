"""Runs a script in a fresh process at RUMUS_NUM_THREADS=1, 2, 3, 4 on the CPU backend (the thread budget
applies from the start of a process), for the tests that compare results across thread counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

THREAD_COUNTS = (1, 2, 3, 4)


def run_at_each_thread_count(script: str, out_dir: Path, *args: str) -> list[tuple[dict[str, Any], Any]]:
    """For each thread count: `python -c script OUT.npz *args`; the script saves its arrays to OUT.npz and
    prints a JSON object on its last line. Returns (that object, the loaded arrays) per thread count."""
    out = []
    for n in THREAD_COUNTS:
        path = out_dir / f"t{n}.npz"
        env = {**os.environ, "RUMUS_NUM_THREADS": str(n), "RUMUS_BACKEND": "cpu"}
        proc = subprocess.run([sys.executable, "-c", script, str(path), *args], env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        out.append((json.loads(proc.stdout.strip().splitlines()[-1]), np.load(path)))
    return out


def run_threads_script(script: str, threads: int) -> dict[str, Any]:
    """`python -c script` at RUMUS_NUM_THREADS=threads; the JSON object on its last line."""
    env = {**os.environ, "RUMUS_NUM_THREADS": str(threads), "RUMUS_BACKEND": "cpu"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    got: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return got
