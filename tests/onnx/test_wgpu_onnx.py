"""An exported model imported with rm.onnx.load runs on the WebGPU backend and matches onnxruntime, and a
model living on wgpu exports like one on the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _helpers import run_ort

import rumus as rm
from rumus import BackendUnavailable, nn

try:
    rm._runtime.backend("wgpu").devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)

DEVICE = "wgpu:0"


def test_imported_cnn_runs_on_wgpu(tmp_path: Any) -> None:
    rm.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 5), nn.LayerNorm(5), nn.GELU())
    model.eval()
    path = tmp_path / "cnn.onnx"
    rm.onnx.export(model, (rm.randn(6, 3, 8, 8),), str(path), input_names=["x"], dynamic_axes={"x": {0: "b"}})
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    loaded = rm.onnx.load(str(path), device=DEVICE)
    got = loaded(rm.tensor(x, device=DEVICE))
    assert str(got.device) == DEVICE
    np.testing.assert_allclose(got.numpy(), run_ort(path, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_model_on_wgpu_exports(tmp_path: Any) -> None:
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 7), nn.Tanh(), nn.Linear(7, 2)).to(DEVICE)
    x = rm.randn(3, 6, device=DEVICE)
    path = tmp_path / "mlp.onnx"
    rm.onnx.export(model, (x,), str(path), input_names=["x"])
    with rm.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(run_ort(path, {"x": x.numpy()})[0], want, rtol=1e-5, atol=1e-5)
