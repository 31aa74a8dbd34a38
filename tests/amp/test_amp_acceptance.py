"""SPEC A2-A4 trained under autocast — float16 with a GradScaler, bfloat16 without one — to the float32
thresholds, on the default device when its backend has the dtype's kernels, else on wgpu (float16)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rumus as rm
from rumus import nn
from rumus.nn import functional as F

from ._devices import device_for
from ._spec import a3_a4, lenet

LOW = [rm.float16, rm.bfloat16]


class _Loop:
    """One training step under autocast; float16 scales the loss (bfloat16 has float32's range)."""

    def __init__(self, dev: str, low: rm.DType, opt: rm.optim.Optimizer) -> None:
        self.kind, self.low, self.opt = dev.split(":")[0], low, opt
        self.scaler = rm.amp.GradScaler(enabled=low == rm.float16)

    def step(self, forward) -> rm.Tensor:
        with rm.autocast(self.kind, dtype=self.low):
            loss = forward()
        assert loss.dtype == rm.float32  # losses run in float32
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad()
        return loss


@pytest.fixture(params=LOW, ids=lambda d: d.name)
def low(request: pytest.FixtureRequest) -> rm.DType:
    return request.param


def test_a2_mini_lenet_under_autocast(low: rm.DType) -> None:
    dev = device_for(low, needs=("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "max_pool2d",
                                 "max_pool2d_backward"))
    rm.manual_seed(0)
    model = lenet.MiniLeNet().to(dev)
    x, y = (t.to(dev) for t in lenet.images())
    loop = _Loop(dev, low, rm.optim.Adam(model.parameters(), lr=0.01))
    loss = None
    for _ in range(100):
        loss = loop.step(lambda: nn.MSELoss()(model(x), y))
    final = float(loss.item())
    assert math.isfinite(final) and final < 0.05, f"A2 under autocast {low}: final loss {final}"
    with rm.no_grad():
        pred = model(x).numpy().ravel()
    assert (pred[[1, 3]] > 0.5).all() and (pred[[0, 2]] < 0.5).all(), pred


def test_a3_classifier_under_autocast(low: rm.DType) -> None:
    dev = device_for(low)
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)
    x, y = (t.to(dev) for t in a3_a4.three_class_data())
    loop = _Loop(dev, low, rm.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01))
    loss = None
    for _ in range(200):
        loss = loop.step(lambda: F.cross_entropy(model(x), y))
    final = float(loss.item())
    assert final < 0.15, f"A3 under autocast {low}: final loss {final}"
    with rm.no_grad():
        assert (rm.argmax(model(x), 1).numpy() == y.numpy()).all()


def test_a4_tiny_gpt_under_autocast(low: rm.DType, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = device_for(low, needs=("softmax", "gelu", "gelu_backward"))
    monkeypatch.setattr(a3_a4, "DEVICE", rm.Device.parse(dev))
    rm.manual_seed(0)
    model = a3_a4.TinyGPT().to(dev)
    x, y = a3_a4.pattern_batch()
    loop = _Loop(dev, low, rm.optim.AdamW(model.parameters(), lr=0.001))
    n = a3_a4.BATCH * a3_a4.SEQ
    loss = None
    for _ in range(200):
        loss = loop.step(lambda: F.cross_entropy(model(x).reshape(n, a3_a4.VOCAB), y.reshape(n)))
    final = float(loss.item())
    assert final < 1.0, f"A4 under autocast {low}: final loss {final}"
    model.eval()
    for start in range(a3_a4.VOCAB):
        prompt = [start, (start + 1) % a3_a4.VOCAB]
        with rm.autocast(dev.split(":")[0], dtype=low):
            full = a3_a4.greedy(model, prompt, a3_a4.SEQ - len(prompt), use_cache=False)
        assert full == [(start + i) % a3_a4.VOCAB for i in range(a3_a4.SEQ)], full
    assert all(np.isfinite(p.numpy()).all() and p.dtype == rm.float32 for p in model.parameters())
