"""SPEC A2 (Mini-LeNet), batched, on the default device (RUMUS_BACKEND)."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import nn

DEVICE = rm.default_device()


class MiniLeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, stride=1, padding=0)
        self.pool = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(36, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: rm.Tensor) -> rm.Tensor:
        x = self.flatten(self.pool(rm.relu(self.conv(x))))  # [B, 4, 3, 3] -> [B, 36]
        return self.fc2(rm.relu(self.fc1(x)))


def images() -> tuple[rm.Tensor, rm.Tensor]:
    """border, centre, border, centre: 1.0 outside / inside the centre 4x4 (rows and cols 2..5)."""
    centre = np.zeros((8, 8), np.float32)
    centre[2:6, 2:6] = 1.0
    border = 1.0 - centre
    x = np.stack([border, centre, border, centre])[:, None]  # [4, 1, 8, 8]
    y = np.array([[0.0], [1.0], [0.0], [1.0]], np.float32)
    return rm.tensor(x, device=DEVICE), rm.tensor(y, device=DEVICE)


@pytest.mark.parametrize("seed", [0, 1])
def test_a2_mini_lenet(seed: int) -> None:
    rm.manual_seed(seed)
    model = MiniLeNet().to(DEVICE)
    assert [k for k, _ in model.named_parameters()] == ["conv.weight", "conv.bias", "fc1.weight", "fc1.bias",
                                                          "fc2.weight", "fc2.bias"]
    assert model.conv.weight.shape == (4, 1, 3, 3)
    opt = rm.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    x, y = images()
    assert model(x).shape == (4, 1)  # one batched forward for all four images
    for _ in range(100):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    final = loss.item()
    assert np.isfinite(final) and final < 0.05, f"final loss {final}"
    with rm.no_grad():
        pred = model(x).numpy().ravel()
    assert (pred[[1, 3]] > 0.5).all() and (pred[[0, 2]] < 0.5).all(), pred
