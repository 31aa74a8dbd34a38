"""Small helpers the optimizers written from core ops share (all run under no_grad inside Optimizer.step)."""

from __future__ import annotations

from typing import Any

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


def group_weight_decay(p: Tensor, grad: Tensor, group: dict[str, Any]) -> Tensor:
    """A group's weight decay in PyTorch's two forms: decoupled (AdamW's: p shrinks by lr * weight_decay
    here) or coupled (folded into the gradient); returns the gradient the update uses."""
    if group["decoupled_weight_decay"]:
        if group["weight_decay"] != 0:
            assign(p, p * (1 - group["lr"] * group["weight_decay"]))
        return grad
    return weight_decayed(grad, p, group["weight_decay"])


def check(name: str, **values: float) -> None:
    """Refuse negative hyper-parameters the way torch.optim does (ValueError)."""
    for key, v in values.items():
        if v < 0:
            raise ValueError(f"{name}: invalid {key} value: {v} (must be >= 0)")
