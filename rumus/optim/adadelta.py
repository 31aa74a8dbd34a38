"""Adadelta (Zeiler), PyTorch's update rule and defaults."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._math import sqrt
from ..tensor import Tensor
from ._update import assign, check, weight_decayed, zeros
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """Adadelta (lr, rho, eps, weight_decay), as torch.optim.Adadelta."""
    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0) -> None:
        check("Adadelta", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        if rho > 1:
            raise ValueError(f"Adadelta: invalid rho value: {rho} (must be in [0, 1])")
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay})

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state.update(step=0, square_avg=zeros(p), acc_delta=zeros(p))
        state["step"] += 1
        rho, eps = group["rho"], group["eps"]
        grad = weight_decayed(grad, p, group["weight_decay"])
        sq, acc = state["square_avg"], state["acc_delta"]
        assign(sq, sq * rho + grad * grad * (1 - rho))
        delta = sqrt(acc + eps) / sqrt(sq + eps) * grad
        assign(acc, acc * rho + delta * delta * (1 - rho))
        assign(p, p - delta * group["lr"])
