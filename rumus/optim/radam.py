"""RAdam (Liu et al.: Adam with a rectified variance), PyTorch's update rule and defaults."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._math import sqrt
from ..tensor import Tensor
from ._update import assign, check, group_weight_decay, lerp, zeros
from .optimizer import Optimizer


class RAdam(Optimizer):
    """Rectified Adam, as torch.optim.RAdam."""
    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled_weight_decay: bool = False) -> None:
        check("RAdam", lr=lr, eps=eps, weight_decay=weight_decay, beta1=betas[0], beta2=betas[1])
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state.update(step=0, exp_avg=zeros(p), exp_avg_sq=zeros(p))
        state["step"] += 1
        step, lr, (b1, b2) = state["step"], group["lr"], group["betas"]
        grad = group_weight_decay(p, grad, group)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        assign(m, lerp(m, grad, 1 - b1))
        assign(v, v * b2 + grad * grad * (1 - b2))
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        m_hat = m / bc1
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        if rho_t > 5.0:  # the variance is tractable: rectified adaptive step
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = (bc2 ** 0.5) / (sqrt(v) + group["eps"])
            assign(p, p - m_hat * lr * adaptive * rect)
        else:  # early steps: plain momentum SGD
            assign(p, p - m_hat * lr)
