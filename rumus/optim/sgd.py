"""SGD with momentum, dampening, Nesterov and weight decay (one fused kernel per parameter)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rumus_contracts import RumusError

from .. import _creation
from ..tensor import Tensor
from .optimizer import Optimizer
from ..ops import get as _op


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay, as torch.optim.SGD."""
    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, master_weights: bool = False) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise RumusError(f"SGD: lr, momentum and weight_decay must be >= 0 (got {lr}, {momentum}, {weight_decay})")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise RumusError("SGD: Nesterov momentum needs momentum > 0 and dampening 0")
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov})
        if master_weights:  # float32 copies of float16/bfloat16 parameters (rumus/optim/_master.py)
            self.enable_master_weights()

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        first = "momentum_buffer" not in state
        if first:
            state["momentum_buffer"] = _creation.zeros_like(p)
        _op("sgd_step")(p, grad, state["momentum_buffer"], lr=float(group["lr"]), momentum=float(group["momentum"]),
                     dampening=float(group["dampening"]), weight_decay=float(group["weight_decay"]),
                     nesterov=bool(group["nesterov"]), first=first)
