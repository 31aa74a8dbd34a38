"""The training step the compile tests compile (shared so each test states only what differs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import rumus as rm
from rumus.nn import functional as F


def train_step(model: Callable[[rm.Tensor], rm.Tensor], opt: Any, loss_fn: Callable[..., rm.Tensor] = F.mse_loss,
               scheduler: Any = None) -> Callable[[rm.Tensor, rm.Tensor], rm.Tensor]:
    """zero_grad, forward, loss, backward, optimizer step (and scheduler step); returns the loss."""
    def step(x: rm.Tensor, y: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        return loss
    return step
