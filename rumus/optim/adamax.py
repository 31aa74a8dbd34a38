"""Adamax (Kingma & Ba, the infinity-norm variant of Adam), PyTorch's update rule and defaults."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._math import abs as tabs
from .._math import maximum
from ..tensor import Tensor
from ._update import assign, check, lerp, weight_decayed, zeros
from .optimizer import Optimizer


class Adamax(Optimizer):
    """Adamax, Adam's infinity-norm variant, as torch.optim.Adamax."""
    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        check("Adamax", lr=lr, eps=eps, weight_decay=weight_decay, beta1=betas[0], beta2=betas[1])
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state.update(step=0, exp_avg=zeros(p), exp_inf=zeros(p))
        state["step"] += 1
        b1, b2 = group["betas"]
        grad = weight_decayed(grad, p, group["weight_decay"])
        m, u = state["exp_avg"], state["exp_inf"]
        assign(m, lerp(m, grad, 1 - b1))
        assign(u, maximum(u * b2, tabs(grad) + group["eps"]))
        clr = group["lr"] / (1 - b1 ** state["step"])
        assign(p, p - m / u * clr)
