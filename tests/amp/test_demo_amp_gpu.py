"""`rumus demo --amp float16` on a real GPU through wgpu: the digits CNN under autocast float16 with a
GradScaler (one fused inf/NaN check per step, skips on the device) reaches the 97% bar, as on the CPU.
Runs only where the wgpu adapter is a GPU: on a software adapter (lavapipe) the demo is too slow for CI.
The lead runs it on the H200: `python -m pytest tests/amp/test_demo_amp_gpu.py -q`. Session 5 found it
failing there (every step skipped): float16 split-K GEMMs wrote float32 words into their float16
result (tests/wgpu/test_gemm_split_k_dtypes.py), fixed in session 6."""

import json
import os
import subprocess
import sys

import pytest

import rumus as rm
from rumus import RumusError, demo


def _gpu_adapter() -> str | None:
    """The wgpu adapter's description when it is a GPU, else None (no wgpu, or a CPU adapter)."""
    try:
        be = rm._runtime.backend("wgpu")
        desc = be.capabilities(be.devices()[0]).description
    except RumusError:
        return None
    return None if desc.endswith(", CPU)") else desc


@pytest.mark.skipif(_gpu_adapter() is None, reason="needs a GPU wgpu adapter (lavapipe is too slow for the demo)")
def test_demo_meets_the_bar_under_autocast_float16_on_the_gpu(tmp_path):
    out = tmp_path / "float16"
    env = dict(os.environ, RUMUS_BACKEND="wgpu")
    proc = subprocess.run([sys.executable, "-m", "rumus", "demo", "--out", str(out), "--epochs", "8", "--amp",
                           "float16"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "meets the 97% bar" in proc.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["amp"] == "float16"
    assert metrics["final_test_accuracy"] >= demo.TARGET_ACCURACY
    assert metrics["loss"][-1] < metrics["loss"][0]
