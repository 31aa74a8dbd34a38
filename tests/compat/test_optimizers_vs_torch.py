"""Every optimizer matches torch.optim step for step on the same model, data and hyper-parameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm

torch = pytest.importorskip("torch")

CASES: list[tuple[str, dict[str, Any]]] = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.05, "amsgrad": True, "weight_decay": 0.01}),
    ("AdamW", {"lr": 0.05, "amsgrad": True}),
    ("Adam", {"lr": 0.05, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.01}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.01, "initial_accumulator_value": 0.1}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.01}),
    ("Adamax", {"lr": 0.02, "weight_decay": 0.01}),
    ("NAdam", {"lr": 0.02}),
    ("NAdam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.02}),
    ("RAdam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
]


def _problem(seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s).astype(np.float32) for s in [(6, 3), (6,), (3, 3), (16, 3), (16, 3)])


def _losses_over_steps(opt: Any, loss_fn: Callable[[], Any], steps: int, use_closure: bool) -> list[float]:
    """The loss before each of `steps` optimizer steps (rumus's or torch's objects alike): through
    opt.step(closure), or backward then opt.step()."""
    losses = []
    for _ in range(steps):
        def closure() -> Any:
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss
        if use_closure:
            losses.append(float(opt.step(closure)))
        else:
            losses.append(float(closure()))
            opt.step()
    return losses


def _run_rumus(name: str, kw: dict[str, Any], steps: int, use_closure: bool) -> tuple[list[float], np.ndarray]:
    w0, b0, _, x, y = _problem()
    lin = rm.nn.Linear(3, 6)
    lin.weight.data = rm.from_numpy(w0)
    lin.bias.data = rm.from_numpy(b0)
    head = rm.nn.Linear(6, 3, bias=False)
    head.weight.data = rm.from_numpy(_problem()[2].repeat(2, axis=1)[:, :6].copy())
    params = list(lin.parameters()) + list(head.parameters())
    opt = getattr(rm.optim, name)(params, **kw)
    xs, ys = rm.from_numpy(x), rm.from_numpy(y)
    losses = _losses_over_steps(opt, lambda: ((head(rm.tanh(lin(xs))) - ys) ** 2).mean(), steps, use_closure)
    return losses, lin.weight.numpy()


def _run_torch(name: str, kw: dict[str, Any], steps: int) -> tuple[list[float], np.ndarray]:
    w0, b0, _, x, y = _problem()
    lin = torch.nn.Linear(3, 6)
    head = torch.nn.Linear(6, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w0))
        lin.bias.copy_(torch.from_numpy(b0))
        head.weight.copy_(torch.from_numpy(_problem()[2].repeat(2, axis=1)[:, :6].copy()))
    opt = getattr(torch.optim, name)(list(lin.parameters()) + list(head.parameters()), **kw, foreach=False)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    losses = _losses_over_steps(opt, lambda: ((head(torch.tanh(lin(xs))) - ys) ** 2).mean(), steps, True)
    return losses, lin.weight.detach().numpy()


@pytest.mark.parametrize(("name", "kw"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("use_closure", [False, True])
def test_matches_torch_over_steps(name: str, kw: dict[str, Any], use_closure: bool) -> None:
    got_losses, got_w = _run_rumus(name, kw, 12, use_closure)
    want_losses, want_w = _run_torch(name, kw, 12)
    np.testing.assert_allclose(got_losses, want_losses, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(got_w, want_w, rtol=2e-5, atol=2e-6)
    # it did optimize (maximize=True climbs)
    assert (got_losses[-1] > got_losses[0]) if kw.get("maximize") else (got_losses[-1] < got_losses[0])


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_matches_torch(line_search: str | None) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    target = rng.standard_normal((8,)).astype(np.float32)

    def fit(lib: Any, params: Any, lbfgs: Any) -> tuple[list[float], np.ndarray]:
        w = params
        opt = lbfgs([w], lr=0.8, max_iter=5, history_size=4, line_search_fn=line_search)
        A, t = lib.from_numpy(a), lib.from_numpy(target)

        def closure() -> Any:
            opt.zero_grad()
            r = A @ w - t
            loss = (r * r).sum() + (w * w * w * w).sum() * 0.1
            loss.backward()
            return loss
        # 3 steps: later ones sit at the optimum, where float32 noise steers the line search (torch's own
        # float32 and float64 runs part there by 3e-4 too)
        out = [float(opt.step(closure)) for _ in range(3)]
        return out, w.detach().numpy()

    got = fit(rm, rm.zeros(4, requires_grad=True), rm.optim.LBFGS)
    want = fit(torch, torch.zeros(4, requires_grad=True), torch.optim.LBFGS)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
    assert got[0][-1] < got[0][0]


def test_lbfgs_needs_a_closure() -> None:
    opt = rm.optim.LBFGS([rm.zeros(2, requires_grad=True)])
    with pytest.raises(rm.RumusError, match="closure"):
        opt.step()
        opt.zero_grad()


def test_bad_hyper_parameters_raise_value_error() -> None:
    p = [rm.zeros(2, requires_grad=True)]
    for cls, kw in [(rm.optim.Adagrad, {"lr": -1}), (rm.optim.RMSprop, {"alpha": -0.1}),
                    (rm.optim.Adadelta, {"rho": 1.5}), (rm.optim.NAdam, {"eps": -1})]:
        with pytest.raises(ValueError):
            cls(p, **kw)
