"""RMSprop (Hinton), PyTorch's form: optional momentum and centred variance."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._math import sqrt
from ..tensor import Tensor
from ._update import assign, check, lerp, weight_decayed, zeros
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """RMSprop (lr, alpha, eps, weight_decay, momentum, centered), as torch.optim.RMSprop."""
    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False) -> None:
        check("RMSprop", lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered})

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state.update(step=0, square_avg=zeros(p))
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros(p)
            if group["centered"]:
                state["grad_avg"] = zeros(p)
        state["step"] += 1
        alpha = group["alpha"]
        grad = weight_decayed(grad, p, group["weight_decay"])
        sq = state["square_avg"]
        assign(sq, sq * alpha + grad * grad * (1 - alpha))
        if group["centered"]:
            ga = state["grad_avg"]
            assign(ga, lerp(ga, grad, 1 - alpha))
            avg = sqrt(sq - ga * ga) + group["eps"]
        else:
            avg = sqrt(sq) + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            assign(buf, buf * group["momentum"] + grad / avg)
            assign(p, p - buf * group["lr"])
        else:
            assign(p, p - grad / avg * group["lr"])
