"""A step the GradScaler skips leaves Adam/AdamW exactly as PyTorch's scaler does: the step count is a
device tensor that the skip puts back, so the bias corrections after an injected inf match
torch.amp.GradScaler("cpu") with torch.optim.Adam/AdamW — on cpu and on wgpu, with no host sync."""

from __future__ import annotations

import math
from collections import Counter
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
         ("Adam", {"amsgrad": True}), ("AdamW", {"maximize": True}), ("AdamW", {"amsgrad": True, "weight_decay": 0.05})]


def _assert_same_state(opt: Any, topt: Any, ours: nn.Linear, theirs: torch.nn.Linear, steps: float) -> None:
    """exp_avg, exp_avg_sq (and AMSGrad's running maximum) and the step count of every parameter as torch's."""
    for a, b in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
        mine, its = opt.state[id(a)], topt.state[b]
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in its:
                np.testing.assert_allclose(mine[key].numpy(), its[key].numpy(), rtol=2e-5, atol=1e-9, err_msg=key)
        assert isinstance(mine["step"], rm.Tensor) and float(mine["step"].item()) == float(its["step"]) == steps


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
    _assert_same_state(opt, topt, ours, theirs, 8.0)  # 10 steps, 2 skipped


def test_state_dict_round_trip_and_the_old_int_step() -> None:
    """A device step count survives state_dict/load_state_dict; an int count (a checkpoint from before,
    or steps taken without a scaler) moves to the device at the first scaled step and keeps counting."""
    ours, theirs = _pair("cpu")
    opt, topt = rm.optim.Adam(ours.parameters(), lr=0.05), torch.optim.Adam(theirs.parameters(), lr=0.05)
    x, tx = rm.tensor(X, dtype=rm.float32, device="cpu"), torch.from_numpy(X).float()
    for _ in range(2):  # unscaled steps: the int count
        (ours(x) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
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


@pytest.mark.parametrize("device", devices())
def test_a_skipped_first_step_leaves_fresh_state_and_counts_stay_per_parameter(device: str) -> None:
    """The first step skipped: zero moments and a zero count, as torch (whose scaler never calls step);
    then a step in which the bias got no gradient advances only the weight's count (torch's per-parameter
    counts)."""
    ours, theirs = _pair(device)
    opt, topt = rm.optim.AdamW(ours.parameters(), lr=0.05), torch.optim.AdamW(theirs.parameters(), lr=0.05)
    scaler, tscaler = rm.amp.GradScaler(init_scale=2.0 ** 8), torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    x, tx = rm.tensor(X, dtype=rm.float32, device=device), torch.from_numpy(X).float()
    before = ours.weight.numpy().copy()
    _step(ours, opt, scaler, x, math.inf)
    _step(theirs, topt, tscaler, tx, math.inf)
    np.testing.assert_array_equal(ours.weight.numpy(), before)
    for p in (ours.weight, ours.bias):
        st = opt.state[id(p)]
        assert float(st["step"].item()) == 0.0
        assert not st["exp_avg"].numpy().any() and not st["exp_avg_sq"].numpy().any()
    for model, opt_, scaler_, x_ in ((ours, opt, scaler, x), (theirs, topt, tscaler, tx)):
        scaler_.scale((model(x_) ** 2).mean()).backward()
        model.bias.grad = None
        scaler_.step(opt_)
        scaler_.update()
        opt_.zero_grad()
    _step(ours, opt, scaler, x, None)
    _step(theirs, topt, tscaler, tx, None)
    _assert_same(ours, theirs)
    assert float(opt.state[id(ours.weight)]["step"].item()) == float(topt.state[theirs.weight]["step"]) == 2.0
    assert float(opt.state[id(ours.bias)]["step"].item()) == float(topt.state[theirs.bias]["step"]) == 1.0


def _count_kernel_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every kernel call from here on, by op (the ops' cached kernels and dispatch plans are dropped first,
    and again when the test ends, so the counting wrappers do not outlive it)."""
    calls: Counter[str] = Counter()
    find = rm._runtime.kernel

    def counted(name: str, backend: object, dtype: rm.DType) -> object:
        kernel = find(name, backend, dtype)

        def run(outs: Any, ins: Any, attrs: Any) -> Any:
            calls[name] += 1
            return kernel(outs, ins, attrs)
        return run

    def forget() -> None:
        for op in rm.ops._ops.values():
            op._kernels.clear()
            op._plans.clear()
    forget()
    monkeypatch.setattr(rm._runtime, "kernel", counted)
    monkeypatch.setattr(rm.ops, "_forget_counted", forget, raising=False)
    return calls


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("amsgrad", [False, True])
def test_a_scaled_step_is_one_fused_kernel_per_parameter(device: str, amsgrad: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a GradScaler, taken or skipped: one adam_step_dev_ per parameter and one adam_step_count_ per
    step, none of the core-op update's kernels (where, copy, mul, ...); on wgpu no host sync and at most a
    few dispatches beyond one per parameter."""
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 2)).to(device)
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, amsgrad=amsgrad)
    scaler = rm.amp.GradScaler(init_scale=2.0 ** 8)
    x = rm.tensor(X, dtype=rm.float32, device=device)
    wgpu = device.startswith("wgpu")
    backend = rm._runtime.backend(device.split(":")[0])
    try:
        for k in range(3):
            scaler.scale((model(x) ** 2).mean()).backward()
            if k == 1:
                model[0].weight.grad[0, 0] = math.inf
            calls = _count_kernel_calls(monkeypatch)
            if wgpu:
                backend.flush(0)
                stats = backend.stats(0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            assert calls["adam_step_dev_"] == 6 and calls["adam_step_count_"] == 1, dict(calls)
            if k:  # the first step also fills the new state (moments, counts) with zeros
                assert sum(calls.values()) <= 6 + 5, dict(calls)  # + the flag's fill, 1/scale, unscale, update
            if wgpu and k:
                after = backend.stats(0)
                assert after["syncs"] == stats["syncs"]
                assert after["dispatches"] - stats["dispatches"] <= 6 + 5
    finally:
        rm.ops._forget_counted()
    steps = {float(opt.state[id(p)]["step"].item()) for p in model.parameters()}
    assert steps == {2.0}  # three steps, the second skipped


def test_master_weights_skip_leaves_the_half_model_and_its_master_alone() -> None:
    """float16 parameters with float32 master copies: the fused kernel updates the master, and a skipped step
    leaves both bit for bit."""
    rm.manual_seed(1)
    model = nn.Linear(5, 4).to("cpu").half()  # cpu named: under RUMUS_BACKEND=wgpu the default is wgpu
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, master_weights=True)
    scaler = rm.amp.GradScaler(init_scale=2.0 ** 8)
    x = rm.tensor(X, dtype=rm.float16, device="cpu")
    for k in range(3):
        scaler.scale((model(x).float() ** 2).mean()).backward()
        if k == 1:
            model.weight.grad[0, 0] = math.inf
        before = [(p.float().numpy().copy(), opt.state.get(id(p), {}).get("master_param")) for p in model.parameters()]
        before = [(a, None if m is None else m.numpy().copy()) for a, m in before]
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        for p, (value, master) in zip(model.parameters(), before):
            changed = not np.array_equal(p.float().numpy(), value)
            assert changed == (k != 1), f"step {k}: parameter changed={changed}"
            if k == 1:
                np.testing.assert_array_equal(opt.state[id(p)]["master_param"].numpy(), master)
            assert p.dtype == rm.float16
    assert float(opt.state[id(model.weight)]["step"].item()) == 2.0
