"""Mixed precision: `autocast` runs each op in the precision its schema declares,
`GradScaler` scales the loss with no host sync in a step, and `master_weights` keeps float32 copies of a
half-precision model's parameters in its optimizer."""

from __future__ import annotations

from typing import Any

from .autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler


def master_weights(optimizer: Any) -> Any:
    """Make `optimizer` keep float32 master copies of its float16/bfloat16 parameters; returns it."""
    return optimizer.enable_master_weights()


__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled", "master_weights"]
