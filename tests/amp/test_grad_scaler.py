"""rumus.amp.GradScaler against torch.amp.GradScaler: the same scale schedule, the same skipped step on an
injected inf, the same parameters afterwards (SGD with momentum: every bit of its state is on the device);
unscale_ before clipping; state_dict; and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import rumus as rm
from rumus import nn

DEVICE = rm.default_device()
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 4))
W0 = RNG.standard_normal((3, 4)) * 0.5
B0 = RNG.standard_normal(3) * 0.1


def _pair() -> tuple[nn.Linear, torch.nn.Linear]:
    ours = nn.Linear(4, 3).to(DEVICE)
    theirs = torch.nn.Linear(4, 3).double()
    with rm.no_grad():
        ours.weight.copy_(rm.tensor(W0, dtype=rm.float32, device=DEVICE))
        ours.bias.copy_(rm.tensor(B0, dtype=rm.float32, device=DEVICE))
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(W0))
        theirs.bias.copy_(torch.from_numpy(B0))
    return ours, theirs


def _loss(model, x):
    y = model(x)
    return (y * y).mean()


def test_schedule_skip_backoff_and_recovery_match_torch() -> None:
    ours, theirs = _pair()
    opt = rm.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    kw = {"init_scale": 2.0 ** 10, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2}
    scaler = rm.amp.GradScaler(**kw)
    tscaler = torch.amp.GradScaler("cpu", **kw)
    x, tx = rm.tensor(X, dtype=rm.float32, device=DEVICE), torch.from_numpy(X)
    scales = []
    for step in range(7):
        scaler.scale(_loss(ours, x)).backward()
        tscaler.scale(_loss(theirs, tx)).backward()
        if step in (2, 5):  # an overflow in one gradient element
            ours.weight.grad[1, 2] = math.inf if step == 2 else math.nan
            theirs.weight.grad[1, 2] = math.inf if step == 2 else math.nan
        before = ours.weight.numpy().copy()
        scaler.step(opt)
        tscaler.step(topt)
        scaler.update()
        opt.zero_grad()
        tscaler.update()
        topt.zero_grad()
        if step in (2, 5):
            np.testing.assert_array_equal(ours.weight.numpy(), before)  # skipped: not a bit changed
        scales.append(scaler.get_scale())
        assert scales[-1] == tscaler.get_scale(), f"step {step}: scale {scales[-1]} vs torch {tscaler.get_scale()}"
        np.testing.assert_allclose(ours.weight.numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours.bias.numpy(), theirs.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    # clean, clean (grow), inf (back off), clean, clean (grow), nan (back off), clean
    assert scales == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0, 1024.0, 1024.0]
    assert scaler.state_dict() == {**tscaler.state_dict()}


def test_first_step_skipped_leaves_fresh_state_at_its_start() -> None:
    """A skipped first step must not leave the momentum buffer (created by that step) holding NaN."""
    ours, theirs = _pair()
    opt = rm.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    scaler, tscaler = rm.amp.GradScaler(init_scale=8.0), torch.amp.GradScaler("cpu", init_scale=8.0)
    x, tx = rm.tensor(X, dtype=rm.float32, device=DEVICE), torch.from_numpy(X)
    for step in range(3):
        scaler.scale(_loss(ours, x)).backward()
        tscaler.scale(_loss(theirs, tx)).backward()
        if step == 0:
            ours.bias.grad[0] = math.inf
            theirs.bias.grad[0] = math.inf
        scaler.step(opt)
        tscaler.step(topt)
        scaler.update()
        opt.zero_grad()
        tscaler.update()
        topt.zero_grad()
    assert np.isfinite(opt.state[id(ours.weight)]["momentum_buffer"].numpy()).all()
    np.testing.assert_allclose(ours.weight.numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_unscale_before_clipping_then_step() -> None:
    ours, theirs = _pair()
    opt = rm.optim.SGD(ours.parameters(), lr=0.1)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    scaler, tscaler = rm.amp.GradScaler(), torch.amp.GradScaler("cpu")
    scaler.scale(_loss(ours, rm.tensor(X, dtype=rm.float32, device=DEVICE))).backward()
    tscaler.scale(_loss(theirs, torch.from_numpy(X))).backward()
    scaler.unscale_(opt)
    tscaler.unscale_(topt)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    rm.nn.utils.clip_grad_norm_(ours.parameters(), 0.05)
    torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.05)
    with pytest.raises(rm.RumusError, match="already called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    tscaler.step(topt)
    scaler.update()
    opt.zero_grad()
    np.testing.assert_allclose(ours.weight.numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_and_disabled_scaler() -> None:
    model, _ = _pair()
    opt = rm.optim.SGD(model.parameters(), lr=0.1)
    scaler = rm.amp.GradScaler(init_scale=4.0, growth_interval=3)
    scaler.scale(_loss(model, rm.tensor(X, dtype=rm.float32, device=DEVICE))).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    sd = scaler.state_dict()
    assert sd == {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                  "_growth_tracker": 1}
    other = rm.amp.GradScaler()
    other.load_state_dict(sd)
    assert other.get_scale() == 4.0 and other.get_growth_interval() == 3
    loss = _loss(model, rm.tensor(X, dtype=rm.float32, device=DEVICE))
    assert float(other.scale(loss).item()) == pytest.approx(4.0 * float(loss.item()), rel=1e-6)
    assert other._get_growth_tracker() == 1
    off = rm.amp.GradScaler(enabled=False)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}


def test_refusals_name_the_problem() -> None:
    with pytest.raises(rm.RumusError, match="growth_factor > 1"):
        rm.amp.GradScaler(growth_factor=0.5)
    model, _ = _pair()
    opt = rm.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(rm.RumusError, match="no loss was scaled"):
        rm.amp.GradScaler().unscale_(opt)
    scaler = rm.amp.GradScaler()
    scaler.scale(_loss(model, rm.tensor(X, dtype=rm.float32, device=DEVICE))).backward()
    scaler.step(opt)
    opt.zero_grad()
    with pytest.raises(rm.RumusError, match="already called"):
        scaler.step(opt)
        opt.zero_grad()
