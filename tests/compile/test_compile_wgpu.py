"""rm.compile on WebGPU: a replayed training step is one submit and one sync (the loss read), its
fused chains are WGSL kernels, and the replay dispatches fewer kernels than the eager step."""

from __future__ import annotations


import rumus as rm
from rumus import nn

from _steps import train_step, wgpu_or_skip

BACKEND = wgpu_or_skip()

DEVICE = "wgpu:0"


def test_a_replayed_step_is_one_submit_and_one_sync() -> None:
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)).to(DEVICE)
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)
    x, y = rm.randn(16, 8, device=DEVICE), rm.randn(16, 4, device=DEVICE)
    step = train_step(model, opt)
    f = rm.compile(step)
    dev = rm.device(DEVICE)
    rec = BACKEND.device(dev).recorder
    f(x, y).item()
    f(x, y).item()
    before, dispatches = dict(BACKEND.stats(dev)), rec.dispatches
    for _ in range(5):
        f(x, y).item()
    after = BACKEND.stats(dev)
    assert after["submits"] - before["submits"] == 5 and after["syncs"] - before["syncs"] == 5
    per_replay = (rec.dispatches - dispatches) / 5
    rm.synchronize(DEVICE)
    eager_before = rec.dispatches
    step(x, y).item()
    eager = rec.dispatches - eager_before
    assert per_replay < eager, (per_replay, eager)
    assert f.replays == 5
