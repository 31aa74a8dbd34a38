"""Module-level behaviour on the backend under test: training converges, state_dict round-trips."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import nn

from . import harness

DEVICE = harness.backend_name()


class XorMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(2, 8)
        self.output = nn.Linear(8, 1)

    def forward(self, x: rm.Tensor) -> rm.Tensor:
        out: rm.Tensor = self.output(rm.relu(self.hidden(x)))
        return out


def train_xor(device: str, steps: int = 200) -> tuple[XorMLP, float, rm.Tensor]:
    rm.manual_seed(0)
    model = XorMLP()
    model.to(device)
    x = rm.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], device=device)
    y = rm.tensor([[0.0], [1.0], [1.0], [0.0]], device=device)
    opt = rm.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = nn.MSELoss()
    loss = None
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert loss is not None
    return model, float(loss.item()), x


def test_xor_converges() -> None:
    _, loss, _ = train_xor(DEVICE)
    assert loss < 0.01, f"XOR MLP final loss {loss} is not below 0.01"


def test_state_dict_round_trip_is_bit_exact(tmp_path: pytest.TempPathFactory) -> None:
    model, _, x = train_xor(DEVICE, steps=20)
    sd = model.state_dict()
    assert list(sd) == ["hidden.weight", "hidden.bias", "output.weight", "output.bias"]
    path = f"{tmp_path}/xor.safetensors"
    rm.io.save_file(sd, path)
    fresh = XorMLP().to(DEVICE)
    fresh.load_state_dict(rm.io.load_file(path, device=DEVICE))
    with rm.no_grad():
        a, b = model(x).numpy(), fresh(x).numpy()
    assert a.tobytes() == b.tobytes()
    assert np.array_equal(a, b)
