"""The torch CPU training steps the CPU benchmarks compare against (cpu_scaling.py, op_profile.py): the MLP
784-256-256-10 (batch 128, Adam, MSE) and the CNN of nn_cnn.py (batch 64, Adam), written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def mlp_and_cnn_steps(rng: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    """(MLP step, CNN step) on torch CPU; `rng` (numpy) draws the CNN's batch."""
    import numpy as np
    import torch
    F = torch.nn.functional
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    mx, my = torch.randn(128, 784), torch.randn(128, 10)

    def mlp_step() -> None:
        opt.zero_grad(set_to_none=True)
        F.mse_loss(mlp(mx), my).backward()
        opt.step()

    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))
    copt = torch.optim.Adam(cnn.parameters(), lr=1e-3)
    xs = torch.from_numpy(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    ys = torch.from_numpy(rng.integers(0, 10, 64))

    def cnn_step() -> None:
        copt.zero_grad(set_to_none=True)
        F.cross_entropy(cnn(xs), ys).backward()
        copt.step()
    return mlp_step, cnn_step
