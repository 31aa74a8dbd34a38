"""Adam and AdamW (decoupled weight decay), fused into one kernel per parameter.

Without a GradScaler the step count is a host int and adam_step takes it as an attribute. Under a
GradScaler (and for AMSGrad) the count is a float32 0-d device tensor (PyTorch's capturable=True form):
adam_step_dev_ reads it and the scaler's found-inf flag on the device, writes nothing on a skipped step,
and adam_step_count_ advances every count of the step once afterwards, so bias corrections count only the
steps taken, as with PyTorch's scaler, and the host never reads the flag (adam_step_dev_ runs on every
backend: where a backend has no kernel for it, its decomposition does). Without a scaler, a parameter
whose backend has no adam_step kernel for its dtype (float16/bfloat16 without master weights, or a
backend made of the primitives alone) is updated from core ops (Adam._from_ops).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rumus_contracts import Device, RumusError, float32, float64

from .. import _creation
from ..tensor import Tensor
from ..autograd.kernel_lookup import has_kernel
from ._update import assign, lerp
from .optimizer import Optimizer
from ..ops import get as _op

_ON_DEVICE = (float32, float64)  # the dtypes of adam_step_dev_ (by kernel or by decomposition)


class Adam(Optimizer):
    """Adam (lr, betas, eps, weight_decay, amsgrad), as torch.optim.Adam; one fused kernel per parameter where the
    backend has it.
    """
    decoupled = False
    fused_skip = True  # reads the GradScaler's flag in its own kernel: no update_unless (rumus/optim/_master.py)

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, master_weights: bool = False) -> None:
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise RumusError(f"{type(self).__name__}: invalid hyper-parameters lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad, "maximize": maximize})
        self._counts: dict[int, tuple[Tensor, list[Tensor]]] = {}  # per flag: the counts adam_step_dev_ read
        self._no_skip: dict[Device, Tensor] = {}  # a 0.0 flag per device, for device counts outside a scaler
        if master_weights:  # float32 copies of float16/bfloat16 parameters (rumus/optim/_master.py)
            self.enable_master_weights()

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        fused, amsgrad = has_kernel("adam_step", p), bool(group.get("amsgrad"))
        on_device = p.dtype in _ON_DEVICE and (self._found_inf is not None or amsgrad
                                               or isinstance(state.get("step"), Tensor))
        if "step" not in state:
            state["step"] = _creation.zeros((), dtype=float32, device=p.device) if on_device else 0
            state["exp_avg"] = _creation.zeros_like(p)
            state["exp_avg_sq"] = _creation.zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = _creation.zeros_like(p)
        if on_device:
            self._fused_on_device(p, grad, group, state)
            return
        if self._found_inf is not None:  # the GradScaler refuses such gradients first; never update unguarded
            raise RumusError(f"{type(self).__name__}: no fused step for a {p.dtype} parameter under a GradScaler; "
                             f"build the optimizer with master_weights=True")
        if isinstance(state["step"], Tensor):
            state["step"].add_(1.0)
        else:
            state["step"] += 1
        if group.get("maximize"):
            grad = -grad
        if not fused:
            self._from_ops(p, grad, group, state)
            return
        b1, b2 = group["betas"]
        _op("adam_step")(p, grad, state["exp_avg"], state["exp_avg_sq"], lr=float(group["lr"]), beta1=float(b1),
                      beta2=float(b2), eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                      decoupled=self.decoupled, step=state["step"])

    def _fused_on_device(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """adam_step_dev_ with the count and the skip flag on the device; the count advances in _finish_step."""
        if not isinstance(state["step"], Tensor):
            # a count from unscaled steps or an old checkpoint: onto the device, where the kernel reads it
            state["step"] = _creation.full((), float(state["step"]), dtype=float32, device=p.device)
        flag = self._found_inf
        if flag is None:
            flag = self._no_skip.get(p.device)
            if flag is None:
                flag = self._no_skip[p.device] = _creation.zeros((), dtype=float32, device=p.device)
        b1, b2 = group["betas"]
        vmax = [state["max_exp_avg_sq"]] if group.get("amsgrad") else []
        _op("adam_step_dev_")(p, grad, state["exp_avg"], state["exp_avg_sq"], vmax, state["step"], flag,
                           lr=float(group["lr"]), beta1=float(b1), beta2=float(b2), eps=float(group["eps"]),
                           weight_decay=float(group["weight_decay"]), decoupled=self.decoupled,
                           maximize=bool(group.get("maximize")))
        self._counts.setdefault(id(flag), (flag, []))[1].append(state["step"])

    def _finish_step(self) -> None:
        """Every count adam_step_dev_ read this step += 1 (unless its flag was raised): one call per flag."""
        for flag, counts in self._counts.values():
            _op("adam_step_count_")(counts, flag)
        self._counts.clear()

    def _from_ops(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """PyTorch's update from core ops, for the parameter dtypes the fused kernels lack (float16/bfloat16
        without master weights; a count in a device tensor gets its bias corrections 1 - beta**step there)."""
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
    """Adam with decoupled weight decay (default 0.01), as torch.optim.AdamW."""
    decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, master_weights: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         master_weights=master_weights)
