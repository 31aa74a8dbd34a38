"""NAdam (Dozat: Adam with Nesterov momentum), PyTorch's update rule, momentum decay and defaults."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._math import sqrt
from ..tensor import Tensor
from ._update import assign, check, group_weight_decay, lerp, zeros
from .optimizer import Optimizer


class NAdam(Optimizer):
    """Adam with Nesterov momentum, as torch.optim.NAdam."""
    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False) -> None:
        check("NAdam", lr=lr, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
              beta1=betas[0], beta2=betas[1])
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "momentum_decay": momentum_decay,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state.update(step=0, mu_product=1.0, exp_avg=zeros(p), exp_avg_sq=zeros(p))
        state["step"] += 1
        step, lr, (b1, b2) = state["step"], group["lr"], group["betas"]
        grad = group_weight_decay(p, grad, group)
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        state["mu_product"] *= mu
        mu_product = state["mu_product"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        assign(m, lerp(m, grad, 1 - b1))
        assign(v, v * b2 + grad * grad * (1 - b2))
        denom = sqrt(v / (1 - b2 ** step)) + group["eps"]
        new = p + grad / denom * (-lr * (1.0 - mu) / (1.0 - mu_product))
        assign(p, new + m / denom * (-lr * mu_next / (1.0 - mu_product * mu_next)))
