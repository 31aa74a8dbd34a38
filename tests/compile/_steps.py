"""The training step the compile tests compile (shared so each test states only what differs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import rumus as rm
from rumus import BackendUnavailable, backend_api
from rumus.nn import functional as F


def wgpu_or_skip() -> Any:
    """The wgpu backend, or a module-level skip where no adapter is present."""
    try:
        backend = backend_api.backend("wgpu")
        backend.devices()
    except BackendUnavailable as exc:
        pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)
    return backend


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
