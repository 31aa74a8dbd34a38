"""A step the GradScaler skips leaves Adam/AdamW exactly as PyTorch's scaler does: the step count is a
device tensor that the skip puts back, so the bias corrections after an injected inf match
torch.amp.GradScaler("cpu") with torch.optim.Adam/AdamW — on cpu and on wgpu, with no host sync."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm
from rumus import nn

from backends_under_test import devices

RNG = np.random.default_rng(7)
X = RNG.standard_normal((16, 5))
SKIPS = {3: math.inf, 7: math.nan}


def _pair(device: str) -> tuple[nn.Linear, torch.nn.Linear]:
    rm.manual_seed(3)
    ours, theirs = nn.Linear(5, 4).to(device), torch.nn.Linear(5, 4)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def _step(model: Any, opt: Any, scaler: Any, x: Any, poison: float | None) -> None:
    """One scaled step, written once for both libraries (their spellings agree)."""
    y = model(x)
    scaler.scale((y * y).mean()).backward()
    if poison is not None:
        model.weight.grad[1, 2] = poison
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()


def _assert_same(ours: nn.Linear, theirs: torch.nn.Linear) -> None:
    for a, b in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


KINDS = [("Adam", {"weight_decay": 0.0}), ("Adam", {"weight_decay": 0.1}), ("AdamW", {"weight_decay": 0.05}),
         ("Adam", {"amsgrad": True}), ("AdamW", {"maximize": True})]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("kind,extra", KINDS, ids=[f"{k}-{'-'.join(e)}" for k, e in KINDS])
def test_skipped_steps_train_to_torchs_parameters(device: str, kind: str, extra: dict[str, float]) -> None:
    ours, theirs = _pair(device)
    opt = getattr(rm.optim, kind)(ours.parameters(), lr=0.05, **extra)
    topt = getattr(torch.optim, kind)(theirs.parameters(), lr=0.05, **extra)
    kw = {"init_scale": 2.0 ** 8, "growth_interval": 3}
    scaler, tscaler = rm.amp.GradScaler(**kw), torch.amp.GradScaler("cpu", **kw)
    x, tx = rm.tensor(X, dtype=rm.float32, device=device), torch.from_numpy(X).float()
    backend = rm._runtime.backend(device.split(":")[0])
    for k in range(10):
        if k == 2 and device.startswith("wgpu"):
            backend.flush(0)
            syncs = backend.stats(0)["syncs"]
        _step(ours, opt, scaler, x, SKIPS.get(k))
        _step(theirs, topt, tscaler, tx, SKIPS.get(k))
    if device.startswith("wgpu"):
        assert backend.stats(0)["syncs"] == syncs, "scaled Adam steps (two of them skipped) waited for the GPU"
    _assert_same(ours, theirs)
    assert scaler.get_scale() == tscaler.get_scale()
    step = opt.state[id(ours.weight)]["step"]
    assert isinstance(step, rm.Tensor) and float(step.item()) == 8.0  # 10 steps, 2 skipped


def test_state_dict_round_trip_and_the_old_int_step() -> None:
    """A device step count survives state_dict/load_state_dict; an int count (a checkpoint from before,
    or steps taken without a scaler) moves to the device at the first scaled step and keeps counting."""
    ours, theirs = _pair("cpu")
    opt, topt = rm.optim.Adam(ours.parameters(), lr=0.05), torch.optim.Adam(theirs.parameters(), lr=0.05)
    x, tx = rm.tensor(X, dtype=rm.float32, device="cpu"), torch.from_numpy(X).float()
    for _ in range(2):  # unscaled steps: the int count
        (ours(x) ** 2).mean().backward()
        opt.step()
        (theirs(tx) ** 2).mean().backward()
        topt.step()
        topt.zero_grad()
    sd = opt.state_dict()
    assert sd["state"][0]["step"] == 2
    fresh = rm.optim.Adam(ours.parameters(), lr=0.05)
    fresh.load_state_dict(sd)  # the old int format
    scaler, tscaler = rm.amp.GradScaler(init_scale=2.0 ** 8), torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    for k in range(4):
        _step(ours, fresh, scaler, x, math.inf if k == 1 else None)
        _step(theirs, topt, tscaler, tx, math.inf if k == 1 else None)
    _assert_same(ours, theirs)
    again = rm.optim.Adam(ours.parameters(), lr=0.05)
    again.load_state_dict(fresh.state_dict())
    assert float(again.state[id(ours.weight)]["step"].item()) == 5.0
    _step(ours, again, scaler, x, None)
    _step(theirs, topt, tscaler, tx, None)
    _assert_same(ours, theirs)
