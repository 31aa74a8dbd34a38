"""Adam and AdamW (decoupled weight decay), fused into one kernel per parameter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rumus_contracts import RumusError

from .. import _creation
from ..tensor import Tensor
from ._update import assign, lerp
from .optimizer import Optimizer
from ..ops import get as _op


class Adam(Optimizer):
    decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, master_weights: bool = False) -> None:
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise RumusError(f"{type(self).__name__}: invalid hyper-parameters lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad, "maximize": maximize})
        if master_weights:  # float32 copies of float16/bfloat16 parameters (rumus/optim/_master.py)
            self.enable_master_weights()

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = _creation.zeros_like(p)
            state["exp_avg_sq"] = _creation.zeros_like(p)
            if group.get("amsgrad"):
                state["max_exp_avg_sq"] = _creation.zeros_like(p)
        state["step"] += 1
        if group.get("maximize"):
            grad = -grad
        b1, b2 = group["betas"]
        if group.get("amsgrad"):
            self._amsgrad(p, grad, group, state)
            return
        _op("adam_step")(p, grad, state["exp_avg"], state["exp_avg_sq"], lr=float(group["lr"]), beta1=float(b1),
                      beta2=float(b2), eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                      decoupled=self.decoupled, step=state["step"])


    def _amsgrad(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """AMSGrad (the fused kernel has no running maximum): PyTorch's update from core ops."""
        from .._math import maximum, sqrt
        lr, wd, (b1, b2), step = group["lr"], group["weight_decay"], group["betas"], state["step"]
        if wd != 0 and self.decoupled:
            assign(p, p * (1 - lr * wd))
        elif wd != 0:
            grad = grad + p * wd
        m, v, vmax = state["exp_avg"], state["exp_avg_sq"], state["max_exp_avg_sq"]
        assign(m, lerp(m, grad, 1 - b1))
        assign(v, v * b2 + grad * grad * (1 - b2))
        assign(vmax, maximum(vmax, v))
        denom = sqrt(vmax) / ((1 - b2 ** step) ** 0.5) + group["eps"]
        assign(p, p - m / denom * (lr / (1 - b1 ** step)))


class AdamW(Adam):
    decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, master_weights: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         master_weights=master_weights)
