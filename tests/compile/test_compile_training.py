"""Whole training steps (forward, backward, optimizer, scheduler) compiled reach eager's losses.

SPEC A1 (XOR MLP), A2 (Mini-LeNet), A3 (3-class classifier, AdamW + cross-entropy) and A4 (TinyGPT) run
twice from the same seed, eagerly and through rm.compile; the CPU must match bit for bit (the same
kernels run, fused chains round op by op), WebGPU within float32 tolerance over fewer steps (lavapipe
is slow). On the CPU the compiled runs also meet the SPEC's loss thresholds.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import nn
from rumus.compile import host_region, host_replay
from rumus.nn import functional as F

from _steps import train_step

VOCAB, D, SEQ, BATCH = 4, 32, 6, 8


class MiniLeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(36, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: rm.Tensor) -> rm.Tensor:
        x = self.pool(rm.relu(self.conv(x))).reshape(x.shape[0], 36)
        return self.fc2(rm.relu(self.fc1(x)))


def _acceptance_module() -> Any:
    """tests/nn/test_acceptance_a3_a4.py, for its TinyGPT (SPEC A4's model, defined once)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nn", "test_acceptance_a3_a4.py")
    spec = importlib.util.spec_from_file_location("_a4_acceptance", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TinyGPT = _acceptance_module().TinyGPT


def xor_case(device: str) -> tuple[nn.Module, Any, tuple[rm.Tensor, ...], Callable[..., rm.Tensor], float]:
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    x = rm.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], device=device)
    y = rm.tensor([[0.0], [1.0], [1.0], [0.0]], device=device)
    return model, rm.optim.Adam(model.parameters(), lr=0.01), (x, y), nn.MSELoss(), 0.01


def lenet_case(device: str) -> tuple[nn.Module, Any, tuple[rm.Tensor, ...], Callable[..., rm.Tensor], float]:
    centre = np.zeros((8, 8), np.float32)
    centre[2:6, 2:6] = 1.0
    x = rm.tensor(np.stack([1 - centre, centre, 1 - centre, centre])[:, None], device=device)
    y = rm.tensor([[0.0], [1.0], [0.0], [1.0]], device=device)
    model = MiniLeNet().to(device)
    return model, rm.optim.Adam(model.parameters(), lr=0.01), (x, y), nn.MSELoss(), 0.05


def three_class_case(device: str) -> tuple[nn.Module, Any, tuple[rm.Tensor, ...], Callable[..., rm.Tensor], float]:
    rows, targets = [], []
    for c in range(3):
        for v in range(4):
            row = [0.1] * 4
            row[c], row[3] = 1.0, v * 0.05
            rows.append(row)
            targets.append(c)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    data = (rm.tensor(rows, device=device), rm.tensor(targets, dtype=rm.int64, device=device))
    return model, opt, data, nn.CrossEntropyLoss(), 0.15


def gpt_case(device: str) -> tuple[nn.Module, Any, tuple[rm.Tensor, ...], Callable[..., rm.Tensor], float]:
    b, s = np.meshgrid(np.arange(BATCH), np.arange(SEQ), indexing="ij")
    x, y = rm.tensor((b + s) % VOCAB, device=device), rm.tensor((b + s + 1) % VOCAB, device=device)
    model = TinyGPT().to(device)

    def loss_fn(logits: rm.Tensor, target: rm.Tensor) -> rm.Tensor:
        return F.cross_entropy(logits.reshape(BATCH * SEQ, VOCAB), target.reshape(BATCH * SEQ))
    return model, rm.optim.AdamW(model.parameters(), lr=0.001), (x, y), loss_fn, 1.0


CASES = {"A1-xor": (xor_case, 200), "A2-lenet": (lenet_case, 100), "A3-classifier": (three_class_case, 200),
         "A4-tinygpt": (gpt_case, 200)}


def train(case: Callable[..., Any], device: str, steps: int, compiled: bool) -> list[float]:
    rm.manual_seed(0)
    model, opt, (x, y), loss_fn, _ = case(device)
    step = train_step(model, opt, loss_fn)
    run = rm.compile(step) if compiled else step
    losses = [run(x, y) for _ in range(steps)]  # read after the loop: a replay's result stays valid
    if compiled:
        assert run.replays == steps - 2 and run.captures == 1
    return [float(v.item()) for v in losses]


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_training_matches_eager(name: str, device: str) -> None:
    case, steps = CASES[name]
    if device != "cpu":
        steps = 12  # lavapipe runs every shader on the CPU: a few replays show the same thing
    eager = train(case, device, steps, compiled=False)
    compiled = train(case, device, steps, compiled=True)
    if device == "cpu":
        assert compiled == eager
        assert compiled[-1] < case(device)[4], f"{name}: final loss {compiled[-1]}"
    else:
        np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-6)


def test_scheduler_and_sgd_momentum_inside_the_compiled_step() -> None:
    """lr changes every other step (StepLR) and SGD's momentum buffer starts on step 1: both are host
    state a replay must advance."""
    def run(compiled: bool) -> list[float]:
        rm.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
        opt = rm.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = rm.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        x, y = rm.randn(6, 3), rm.randn(6, 2)
        step = train_step(model, opt, scheduler=sched)
        f = rm.compile(step) if compiled else step
        out = [float(f(x, y).item()) for _ in range(10)]
        assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 5)
        return out
    assert run(True) == run(False)


def test_gradient_accumulation_across_compiled_calls() -> None:
    """Without zero_grad inside, each call adds to .grad: the replay binds the current gradient."""
    rm.manual_seed(0)
    # parameters first used deep into the step (after fused chains) must still bind their current .grad
    lin = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))
    xs = [rm.randn(5, 4) for _ in range(5)]

    def fwd_bwd(x: rm.Tensor) -> rm.Tensor:
        loss = (lin(x) * 2.0 + 1.0).square().mean()
        loss.backward()
        return loss

    compiled = rm.compile(fwd_bwd)
    for x in xs:
        compiled(x)
    got = [p.grad.numpy().copy() for p in lin.parameters()]
    lin.zero_grad()
    for x in xs:
        fwd_bwd(x)
    want = [p.grad.numpy() for p in lin.parameters()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert compiled.replays >= 2


@pytest.mark.parametrize("make_opt", [
    lambda ps: rm.optim.Adam(ps, lr=0.01),
    lambda ps: rm.optim.AdamW(ps, lr=0.01, amsgrad=True),  # composite update: per-step Python numbers
    lambda ps: rm.optim.Adamax(ps, lr=0.01),
    lambda ps: rm.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    lambda ps: rm.optim.RMSprop(ps, lr=0.01),
], ids=["adam", "adamw-amsgrad", "adamax", "sgd-nesterov", "rmsprop"])
def test_optimizer_kernels_replay_without_dispatch(make_opt: Callable[..., Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The optimizer's Python re-runs on every replay (step counts, lr) but its ops only refresh the
    captured kernels' attributes: no op is dispatched during a replay, and the losses equal eager's."""
    def run(compiled: bool) -> list[float]:
        rm.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2))
        opt = make_opt(model.parameters())
        x, y = rm.randn(5, 3), rm.randn(5, 2)
        step = train_step(model, opt)
        f = rm.compile(step) if compiled else step
        out = [f(x, y) for _ in range(3)]
        if compiled:
            probed, dispatched = [], []
            real_probe, real_fall_back = host_replay.Prober.probe, host_replay.Prober._fall_back

            def probe(self: Any, op: Any, args: Any, attrs: Any) -> Any:
                probed.append(op.name)
                return real_probe(self, op, args, attrs)

            def fall_back(self: Any, op: Any, args: Any, attrs: Any) -> Any:
                dispatched.append(op.name)
                return real_fall_back(self, op, args, attrs)
            monkeypatch.setattr(host_replay.Prober, "probe", probe)
            monkeypatch.setattr(host_replay.Prober, "_fall_back", fall_back)
            out += [f(x, y) for _ in range(5)]
            monkeypatch.undo()
            assert probed and dispatched == [] and f.replays == 6
        else:
            out += [f(x, y) for _ in range(5)]
        return [float(v.item()) for v in out]
    assert run(True) == run(False)


def test_accumulated_gradients_reach_a_host_region_inside_the_step() -> None:
    """.grad is not reset inside the step, so each call adds to it; a host region in the same step (here
    a user one: it logs the gradient's norm) must see this replay's gradient, not the capture's."""
    def run(compiled: bool) -> list[float]:
        rm.manual_seed(0)
        lin = nn.Linear(3, 2)
        norms: list[float] = []

        @host_region
        def log_grad() -> None:
            norms.append(float(lin.weight.grad.square().sum().item()))

        def fwd_bwd(x: rm.Tensor) -> rm.Tensor:
            loss = lin(x).square().mean()
            loss.backward()
            log_grad()
            return loss
        f = rm.compile(fwd_bwd) if compiled else fwd_bwd
        for k in range(5):
            f(rm.full((4, 3), float(k + 1)))
        return norms
    assert run(True) == run(False)



def test_a_captured_step_copies_no_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's own references to a gradient's storage do not make autograd copy it into .grad: the
    captured step launches no copy kernel (one per parameter before), and each .grad is still its own tensor."""
    from rumus.compile import capture
    names: list[str] = []
    record = capture.Recorder.record

    def noting(self: capture.Recorder, schema: Any, *args: Any) -> None:
        names.append(schema.name)
        record(self, schema, *args)

    monkeypatch.setattr(capture.Recorder, "record", noting)
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = rm.optim.SGD(model.parameters(), lr=0.1)
    run = rm.compile(train_step(model, opt))
    x, y = rm.randn(5, 8), rm.randn(5, 4)
    for _ in range(3):
        run(x, y)
    assert run.captures == 1 and "linear" in names
    assert "copy" not in names, names
    storages = [p.grad._storage for p in model.parameters() if p.grad is not None]
    assert len(storages) == 4 and len({id(s) for s in storages}) == 4
