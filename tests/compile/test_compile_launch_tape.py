"""rm.compile on WebGPU replays captured kernels from their recorded launches (rumus/compile/tape.py).

From the first replay on, a kernel whose launches do not change between replays is issued straight
from its tape: no Python wrapper, no scratch allocation, no bind-group creation. These tests check
that this changes nothing: the same dispatches, bit-identical results to replaying through the
wrappers, eager's results within float32 tolerance, new inputs swapped in, fresh dropout seeds, and
the index error flag still raised at the next read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import IndexOutOfRange, nn
from rumus.compile.program import Step
from rumus.nn import functional as F

from _steps import wgpu_or_skip

BACKEND = wgpu_or_skip()

DEVICE = "wgpu:0"


def _cnn(dropout: float) -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(dropout), nn.Linear(6 * 2 * 2, 3))


def _run(mode: str, dropout: float, batches: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[Any], Any]:
    """Losses and final parameters of steps over `batches`: eager, compiled with tapes, or without."""
    rm.manual_seed(0)
    model = _cnn(dropout).to(DEVICE)
    opt = rm.optim.Adam(model.parameters(), lr=1e-2)

    def step(x: rm.Tensor, y: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    f: Any = step
    if mode != "eager":
        f = rm.compile(step)
        f.tape = mode == "taped"
    rm.manual_seed(1)  # dropout draws from here on, in the same order in every mode
    losses = [f(rm.tensor(x, device=DEVICE), rm.tensor(y, device=DEVICE)) for x, y in batches]
    values = [float(lo.item()) for lo in losses]  # earlier results stay valid after later replays
    params = [p.numpy() for p in model.parameters()]
    return [values, params], f


def _batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((5, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, 5)) for _ in range(n)]


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_taped_replay_equals_wrapper_replay_bit_for_bit_and_eager_closely(dropout: float) -> None:
    batches = _batches(6)  # new data each call: the input slots are swapped into the taped launches
    (taped_losses, taped_params), f = _run("taped", dropout, batches)
    (plain_losses, plain_params), g = _run("plain", dropout, batches)
    (eager_losses, eager_params), _ = _run("eager", dropout, batches)
    assert f.stats()["replays"] == 4 and g.stats()["replays"] == 4
    assert taped_losses == plain_losses
    for a, b in zip(taped_params, plain_params):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(taped_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(taped_params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    steps = [s for s in next(iter(f._cache.values())).program.items if isinstance(s, Step)]
    assert sum(s.launches is not None for s in steps) == sum(not s.seeded for s in steps)
    assert (dropout > 0) == any(s.seeded and s.launches is None for s in steps)


def test_a_taped_replay_makes_the_same_dispatches_without_running_kernel_wrappers() -> None:
    rec = BACKEND.device(rm.device(DEVICE)).recorder
    device = BACKEND.device(rm.device(DEVICE)).device
    counts = {}
    for mode in ("taped", "plain"):
        _, f = _run(mode, 0.0, _batches(4))
        x, y = (rm.tensor(a, device=DEVICE) for a in _batches(1)[0])
        f(x, y).item()
        calls = [0]
        for s in next(iter(f._cache.values())).program.items:
            if isinstance(s, Step):
                s.kernel = _counted(s.kernel, calls)
        before, original = rec.dispatches, device.create_bind_group
        device.create_bind_group = _counted(original, made := [0])
        try:
            f(x, y).item()
        finally:
            device.create_bind_group = original
        counts[mode] = (rec.dispatches - before, calls[0], made[0])
    assert counts["taped"][0] == counts["plain"][0] > 0
    assert counts["taped"][1:] == (0, 0)  # no wrapper ran, no bind group was made
    assert counts["plain"][1] > 10


def _counted(fn: Any, calls: list[int]) -> Any:
    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return fn(*args, **kwargs)
    return counting


def test_an_index_out_of_range_in_a_taped_kernel_still_raises_at_the_next_read() -> None:
    x = rm.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=DEVICE)
    f = rm.compile(lambda t, i: (t.gather(1, i) * 2.0).sum())
    good = rm.tensor([[0], [1], [3]], device=DEVICE)
    for _ in range(4):
        assert f(x, good).item() == 2.0 * (0 + 5 + 11)
    assert f.stats()["replays"] == 2
    bad = rm.tensor([[0], [9], [3]], device=DEVICE)
    with pytest.raises(IndexOutOfRange):
        f(x, bad).item()
    assert f(x, good).item() == 32.0  # the flag was cleared with the error
