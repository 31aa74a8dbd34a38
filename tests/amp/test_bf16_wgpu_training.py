"""SPEC A2 and A3 trained on the WebGPU backend under `rm.autocast("wgpu", dtype=rm.bfloat16)` to the
float32 thresholds (test_amp_acceptance runs them on the default device; these pin the GPU). The lowered
ops run in bfloat16 there: matmul and conv through the widening wrapper, the elementwise ops natively."""

from __future__ import annotations

import math

import rumus as rm
from rumus import nn
from rumus.nn import functional as F

from ._devices import device_for
from ._spec import a3_a4, lenet

DEVICE = device_for(rm.bfloat16, only="wgpu", needs=("conv2d", "max_pool2d", "max_pool2d_backward"))


def _step(opt: rm.optim.Optimizer, forward) -> rm.Tensor:
    with rm.autocast("wgpu", dtype=rm.bfloat16):
        loss = forward()
    assert loss.dtype == rm.float32
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def test_a2_mini_lenet_on_wgpu_under_bfloat16_autocast() -> None:
    rm.manual_seed(0)
    model = lenet.MiniLeNet().to(DEVICE)
    x, y = (t.to(DEVICE) for t in lenet.images())
    opt = rm.optim.Adam(model.parameters(), lr=0.01)
    with rm.autocast("wgpu", dtype=rm.bfloat16):
        assert model(x).dtype == rm.bfloat16  # the last layer is a linear: lowered
    loss = None
    for _ in range(100):
        loss = _step(opt, lambda: nn.MSELoss()(model(x), y))
    final = float(loss.item())
    assert math.isfinite(final) and final < 0.05, f"A2 on wgpu under autocast bfloat16: final loss {final}"
    with rm.no_grad():
        pred = model(x).numpy().ravel()
    assert (pred[[1, 3]] > 0.5).all() and (pred[[0, 2]] < 0.5).all(), pred


def test_a3_classifier_on_wgpu_under_bfloat16_autocast() -> None:
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(DEVICE)
    x, y = (t.to(DEVICE) for t in a3_a4.three_class_data())
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    loss = None
    for _ in range(200):
        loss = _step(opt, lambda: F.cross_entropy(model(x), y))
    final = float(loss.item())
    assert final < 0.15, f"A3 on wgpu under autocast bfloat16: final loss {final}"
    with rm.no_grad():
        assert (rm.argmax(model(x), 1).numpy() == y.numpy()).all()
    assert all(p.dtype == rm.float32 for p in model.parameters())
