"""Adagrad (Duchi et al.), PyTorch's update rule and defaults."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import _creation
from .._math import sqrt
from ..tensor import Tensor
from ._update import assign, check, weight_decayed
from .optimizer import Optimizer


class Adagrad(Optimizer):
    """Adagrad (lr, lr_decay, weight_decay, initial_accumulator_value, eps), as torch.optim.Adagrad."""
    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10) -> None:
        check("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
              initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "eps": eps})

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state["step"] = 0
            state["sum"] = _creation.full_like(p, float(group["initial_accumulator_value"]))
        state["step"] += 1
        grad = weight_decayed(grad, p, group["weight_decay"])
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        assign(state["sum"], state["sum"] + grad * grad)
        assign(p, p - grad / (sqrt(state["sum"]) + group["eps"]) * clr)
