"""The plugin as a third party's: found through its entry point, listed by `rumus info`, and leaving the core
working when it is not loaded (RUMUS_PLUGINS without it: the core's im2col kernels run alone)."""

from __future__ import annotations

import os
import subprocess
import sys

import rumus as rm
from rumus import backend_api as api


def _run(code: str, **env: str) -> str:
    full = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp"), **env}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rumus_info_lists_the_plugin() -> None:
    out = _run("from rumus.cli import main; main(['info'])")
    assert "vision" in out.split("plugins loaded:")[1].splitlines()[0]


def test_without_the_plugin_the_core_kernels_run_alone() -> None:
    out = _run("import rumus as rm, numpy as np\n"
               "from rumus import backend_api as api\n"
               "print(api.plugins().loaded)\n"
               "print([e.owner for e in api.plugins().kernels.candidates('conv2d', 'cpu', rm.float32)])\n"
               "x = rm.tensor(np.ones((1, 4, 5, 5)), dtype='float32')\n"
               "w = rm.tensor(np.ones((4, 1, 3, 3)), dtype='float32')\n"
               "print(float(rm.nn.functional.conv2d(x, w, padding=1, groups=4).sum()))\n",
               RUMUS_PLUGINS="hello")
    loaded, owners, total = out.splitlines()
    assert "vision" not in loaded
    assert owners == "['cpu']"
    assert float(total) == 4 * (4 * 4 + 12 * 6 + 9 * 9)  # 5x5 plane: 4 corners of 4 taps, 12 edges of 6, 9 inside of 9


def test_the_plugin_adds_no_op_of_its_own() -> None:
    """It extends the core's conv ops only: no schema is owned by it."""
    assert "vision" not in set(api.plugins().ops.owner.values())
    assert rm.ops.conv2d is not None


def _conformance(**env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp"), **env}
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "rumus_conformance", "-q", "-p", "no:cacheprovider",
           "-k", "test_forward and conv2d_backward_weight-float32"]
    return subprocess.run(cmd, capture_output=True, text=True, env={**full, "RUMUS_BACKEND": "cpu"}, timeout=300)


def test_conformance_runs_the_plugin_kernels_and_fails_when_none_is_exercised() -> None:
    """With the predicate accepting its samples the check passes; a mode that declines every call leaves the
    conditional kernel unexercised, which the suite reports as UNTESTED instead of passing."""
    ok = _conformance()
    assert ok.returncode == 0, ok.stdout[-2000:]
    declined = _conformance(RUMUS_VISION_CONV="im2col")
    assert declined.returncode != 0 and "UNTESTED: the conditional kernel(s) of ['vision']" in declined.stdout
