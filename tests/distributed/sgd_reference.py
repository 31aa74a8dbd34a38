"""The single-process training loop the distributed cases compare against: SGD with momentum 0.9 (its
updates scale with the gradient, unlike Adam's, so a mis-scaled all-reduce shows) on an MSE loss, one
step per leading index of the data."""

from __future__ import annotations

import numpy as np

import rumus as rm
from rumus import nn


def train_mse_sgd(model: nn.Module, x: np.ndarray, y: np.ndarray, lr: float) -> None:
    opt = rm.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for s in range(len(x)):
        opt.zero_grad()
        nn.functional.mse_loss(model(rm.from_numpy(x[s])), rm.from_numpy(y[s])).backward()
        opt.step()
