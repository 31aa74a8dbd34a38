"""Adam and AdamW (decoupled weight decay), fused into one kernel per parameter; under a GradScaler the step
count is a float32 device tensor and the update runs from core ops (see Adam._update)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rumus_contracts import RumusError, float32

from .. import _creation
from ..tensor import Tensor
from ._update import assign, lerp
from .optimizer import Optimizer
from ..ops import get as _op


class Adam(Optimizer):
    decoupled = False
    device_step = True  # under a GradScaler, state["step"] becomes a device tensor (rumus/optim/_master.py)

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
            # under a GradScaler the count lives on the device (PyTorch's capturable=True): a skipped step
            # puts it back with everything else it wrote (rumus/optim/_master.py), so bias corrections
            # count only the steps taken, as with PyTorch's scaler, and the host never reads the flag
            state["step"] = 0 if self._skip_if is None else _creation.zeros((), dtype=float32, device=p.device)
            state["exp_avg"] = _creation.zeros_like(p)
            state["exp_avg_sq"] = _creation.zeros_like(p)
            if group.get("amsgrad"):
                state["max_exp_avg_sq"] = _creation.zeros_like(p)
        if isinstance(state["step"], Tensor):
            state["step"].add_(1.0)
        else:
            state["step"] += 1
        if group.get("maximize"):
            grad = -grad
        b1, b2 = group["betas"]
        if group.get("amsgrad") or isinstance(state["step"], Tensor):
            self._from_ops(p, grad, group, state)
            return
        _op("adam_step")(p, grad, state["exp_avg"], state["exp_avg_sq"], lr=float(group["lr"]), beta1=float(b1),
                      beta2=float(b2), eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                      decoupled=self.decoupled, step=state["step"])

    def _from_ops(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """PyTorch's update from core ops, for AMSGrad (the fused kernel keeps no running maximum) and for a
        step count held in a device tensor (its bias corrections 1 - beta**step are computed there)."""
        from .._math import maximum, sqrt
        lr, wd, (b1, b2), step = group["lr"], group["weight_decay"], group["betas"], state["step"]
        if wd != 0 and self.decoupled:
            assign(p, p * (1 - lr * wd))
        elif wd != 0:
            grad = grad + p * wd
        m, v = state["exp_avg"], state["exp_avg_sq"]
        assign(m, lerp(m, grad, 1 - b1))
        assign(v, v * b2 + grad * grad * (1 - b2))
        if group.get("amsgrad"):
            vmax = state["max_exp_avg_sq"]
            assign(vmax, maximum(vmax, v))
            v = vmax
        denom = sqrt(v) / (_bias_correction(b2, step) ** 0.5) + group["eps"]
        assign(p, p - m / denom * (lr / _bias_correction(b1, step)))


def _bias_correction(beta: float, step: int | Tensor) -> float | Tensor:
    """1 - beta**step; for a device count as -expm1(step * log(beta)) with the log taken in float64 here:
    1 - 0.999**1 in float32 would cancel to 1.3e-5 relative error (float32(0.999) is 0.99900001)."""
    if not isinstance(step, Tensor):
        return 1 - beta ** step
    from .._math import expm1
    return -expm1(step * math.log(beta)) if beta > 0 else 1.0  # 0**step == 0 for every step taken


class AdamW(Adam):
    decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, master_weights: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         master_weights=master_weights)
