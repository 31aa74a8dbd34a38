"""On the GPU a scaled training step never waits for the device: autocast float16 forward, scaled
backward, unscale + inf check, the (conditionally undone) optimizer step and the scale update are all
recorded work. An injected inf makes the step a no-op and halves the scale; the next steps recover."""

from __future__ import annotations

import math

import numpy as np

import rumus as rm
from rumus import nn

from ._devices import device_for

DEVICE = device_for(rm.float16, only="wgpu")
BACKEND = rm._runtime.backend("wgpu")
RNG = np.random.default_rng(3)
X = RNG.standard_normal((12, 4))
Y = RNG.integers(0, 3, 12)


def _snapshot(model: nn.Module) -> list[np.ndarray]:
    return [p.numpy().copy() for p in model.parameters()]


def test_skip_backoff_and_recovery_with_the_sync_counter_unchanged() -> None:
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)).to(DEVICE)
    opt = rm.optim.AdamW(model.parameters(), lr=0.01)
    scaler = rm.amp.GradScaler(init_scale=2.0 ** 12, growth_interval=2)
    x = rm.tensor(X, dtype=rm.float32, device=DEVICE)
    y = rm.tensor(Y, device=DEVICE)

    def step(poison: bool) -> rm.Tensor:
        with rm.autocast("wgpu", dtype=rm.float16):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y)
        assert logits.dtype == rm.float16 and loss.dtype == rm.float32
        scaler.scale(loss).backward()
        if poison:
            model[0].weight.grad[0, 0] = math.inf
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        return loss

    step(False)
    before = _snapshot(model)
    BACKEND.flush(0)
    syncs = BACKEND.stats(0)["syncs"]
    step(True)  # skipped
    assert BACKEND.stats(0)["syncs"] == syncs, "a scaled step with an overflow waited for the GPU"
    after = _snapshot(model)
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)
    assert scaler.get_scale() == 2.0 ** 11  # backed off
    BACKEND.flush(0)
    syncs = BACKEND.stats(0)["syncs"]
    losses = [step(False) for _ in range(30)]
    assert BACKEND.stats(0)["syncs"] == syncs, "clean scaled steps waited for the GPU"
    assert scaler.get_scale() > 2.0 ** 11  # grew again (every 2 clean steps; float16 overflows back it off)
    first, last = float(losses[0].item()), float(losses[-1].item())
    assert math.isfinite(last) and last < 0.8 * first, (first, last)
    assert all(np.isfinite(p).all() for p in _snapshot(model))
