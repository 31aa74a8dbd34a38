"""OpSchema.volatile: attributes that change every call (an optimizer's step count and learning rate, dropout's
seed and offset) stay out of the dispatcher's plan key, so a training step is not planned afresh each time
(Adam's steps were: 15-40 us per parameter per step) -- and every call still gets its own values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rumus as rm
from rumus.nn import functional as F
from rumus.ops import get as op
from rumus_contracts import OpSchema, PluginError


def _counting_prepare(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    target = op(name)
    calls = [0]
    original = target._prepare

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(target, "_prepare", counted)
    target._plans.clear()
    return calls


def test_adam_is_planned_once_per_parameter_and_follows_a_changing_lr(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_prepare(monkeypatch, "adam_step")
    rng = np.random.default_rng(0)
    w0, grads = rng.standard_normal((5, 3)), [rng.standard_normal((5, 3)) for _ in range(6)]
    p, tp = rm.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    opt, topt = rm.optim.Adam([p], lr=0.1), torch.optim.Adam([tp], lr=0.1)
    for step, g in enumerate(grads):
        lr = 0.1 / (step + 1)  # a schedule: lr differs every step, as does the step count
        for group in opt.param_groups:
            group["lr"] = lr
        for group in topt.param_groups:
            group["lr"] = lr
        p.grad, tp.grad = rm.tensor(g), torch.tensor(g)
        opt.step()
        opt.zero_grad()
        topt.step()
        topt.zero_grad()
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert calls[0] == 1  # six steps, one plan
    assert len(op("adam_step")._plans) == 1


def test_sgd_with_momentum_is_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_prepare(monkeypatch, "sgd_step")
    p = rm.tensor(np.ones(4), requires_grad=True)
    opt = rm.optim.SGD([p], lr=0.5, momentum=0.9)
    tp = torch.ones(4, dtype=torch.float64, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.5, momentum=0.9)
    for k in range(3):
        g = np.arange(4.0) + k
        p.grad, tp.grad = rm.tensor(g), torch.tensor(g)
        opt.step()
        opt.zero_grad()
        topt.step()
        topt.zero_grad()
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert calls[0] == 1  # the first step (first=True) and the later ones share the plan


def test_dropout_masks_still_follow_seed_and_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_prepare(monkeypatch, "dropout")
    x = rm.ones(64, 64)
    a, b, a2 = (op("dropout")(x, p=0.5, seed=s, offset=o).numpy() for s, o in ((1, 0), (2, 0), (1, 0)))
    c = op("dropout")(x, p=0.5, seed=1, offset=4096).numpy()
    assert calls[0] == 1
    np.testing.assert_array_equal(a, a2)  # same seed and offset: the same mask
    assert not np.array_equal(a, b) and not np.array_equal(a, c)  # another seed or offset: another mask
    assert set(np.unique(a)) == {0.0, 2.0}
    y = F.dropout(x, p=0.25, training=True)  # p is not volatile: its own plan, and its own scale
    assert set(np.unique(y.numpy())) <= {0.0, np.float32(1 / 0.75)}


def test_a_volatile_name_must_be_an_attribute() -> None:
    with pytest.raises(PluginError, match="volatile"):
        OpSchema("bad_volatile", ("x",), lambda s, a: [tuple(s[0])], attrs={"lr": 0.1}, volatile=("step",))
