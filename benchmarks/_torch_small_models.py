"""The torch side of the small MLP and CNN training steps that several benchmarks time against RUMUS's
(cpu_scaling.py, op_profile.py): one definition, so their torch rows measure the same models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def torch_mlp_step() -> Callable[[], None]:
    """784-256-256-10 ReLU MLP, Adam, MSE on a [128, 784] batch; seeds torch with 0 first."""
    import torch
    F = torch.nn.functional
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    mx, my = torch.randn(128, 784), torch.randn(128, 10)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.mse_loss(mlp(mx), my).backward()
        opt.step()
    return step


def torch_cnn_step(xs: Any, ys: Any) -> Callable[[], None]:
    """Two conv-ReLU-maxpool blocks and a linear head on MNIST-sized images xs [N, 1, 28, 28], Adam,
    cross-entropy against the class indices ys [N]."""
    import torch
    F = torch.nn.functional
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))
    opt = torch.optim.Adam(cnn.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(cnn(xs), ys).backward()
        opt.step()
    return step
