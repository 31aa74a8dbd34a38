"""Small helpers the optimizers written from core ops share (all run under no_grad inside Optimizer.step)."""

from __future__ import annotations

from .. import _creation
from ..tensor import Tensor


def assign(dst: Tensor, value: Tensor) -> None:
    """dst <- value in place (optimizer state and parameters keep their identity and storage)."""
    dst.copy_(value)


def zeros(p: Tensor) -> Tensor:
    return _creation.zeros_like(p)


def lerp(a: Tensor, b: Tensor, w: float) -> Tensor:
    """PyTorch's lerp for w < 0.5: a + w * (b - a)."""
    return a + (b - a) * w if w < 0.5 else b - (b - a) * (1 - w)


def weight_decayed(grad: Tensor, p: Tensor, weight_decay: float) -> Tensor:
    """L2 penalty folded into the gradient (PyTorch's coupled weight_decay)."""
    return grad + p * weight_decay if weight_decay != 0 else grad


def check(name: str, **values: float) -> None:
    """Refuse negative hyper-parameters the way torch.optim does (ValueError)."""
    for key, v in values.items():
        if v < 0:
            raise ValueError(f"{name}: invalid {key} value: {v} (must be >= 0)")
