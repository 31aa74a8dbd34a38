"""`rumus demo` as a user runs it (a subprocess): the digits CNN meets the accuracy bar and leaves a
loadable safetensors model, a PNG of its curves and metrics.json in --out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

import rumus as rm
from rumus import demo


def test_demo_trains_saves_and_reports(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "rumus", "demo", "--out", str(out), "--epochs", "8"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "meets the 97% bar" in proc.stdout
    assert str(out / "digits_cnn.safetensors") in proc.stdout and str(out / "curves.png") in proc.stdout
    assert "step" in proc.stderr and "loss=" in proc.stderr  # the tqdm bar with the loss

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["final_test_accuracy"] >= demo.TARGET_ACCURACY
    assert len(metrics["loss"]) == len(metrics["test_accuracy"]) == 8
    assert metrics["loss"][-1] < metrics["loss"][0]
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the saved weights (and BatchNorm running statistics) reproduce the reported accuracy
    model = demo.DigitsCNN().to(rm.default_device())
    model.load_state_dict(rm.io.load_file(out / "digits_cnn.safetensors", device=rm.default_device()))
    _, _, x_test, y_test = demo.load_digits(0)
    acc = demo.accuracy(model, x_test, y_test, rm.default_device())
    assert np.isclose(acc, metrics["final_test_accuracy"])
