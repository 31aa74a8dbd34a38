"""`rumus demo --amp` (issue 13): the digits CNN trained under autocast float16 with a GradScaler, and under
autocast bfloat16, reaches the same 97% held-out bar as float32 (the CPU backend; on lavapipe the demo is too
slow for CI)."""

import json
import os
import subprocess
import sys

import pytest

from rumus import demo


@pytest.mark.parametrize("amp", ["float16", "bfloat16"])
def test_demo_meets_the_bar_under_autocast(tmp_path, amp):
    out = tmp_path / amp
    env = dict(os.environ, RUMUS_BACKEND="cpu")
    proc = subprocess.run([sys.executable, "-m", "rumus", "demo", "--out", str(out), "--epochs", "8", "--amp", amp],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "meets the 97% bar" in proc.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["amp"] == amp
    assert metrics["final_test_accuracy"] >= demo.TARGET_ACCURACY
    assert metrics["loss"][-1] < metrics["loss"][0]
