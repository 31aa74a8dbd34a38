"""The optimizer steps and the GradScaler's ops from elementwise ops: each computes the new values,
then writes them into the state it updates (rumus.decompositions._helpers.write). A skipped step (the
scaler's found_inf flag) selects the old values with `where`, so the host never reads the flag."""

from __future__ import annotations

import math

from rumus_contracts import float32

from .. import _math as M
from .._tensor_base import Tensor
from . import register
from ._helpers import const, total, write


@register("sgd_step")
def sgd_step(param: Tensor, grad: Tensor, momentum_buffer: Tensor, *, lr: float, momentum: float, dampening: float,
             weight_decay: float, nesterov: bool, first: bool) -> None:
    g = grad
    if weight_decay:
        g = M.add(g, M.mul(param, weight_decay))
    if momentum:
        buf = g if first else M.add(M.mul(momentum_buffer, momentum), M.mul(g, 1.0 - dampening))
        write(momentum_buffer, buf)
        g = M.add(g, M.mul(buf, momentum)) if nesterov else buf
    write(param, M.sub(param, M.mul(g, lr)))


def _adam_update(param: Tensor, g: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, vmax: Tensor | None, lr: float,
                 beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool,
                 bc1: Tensor | float, bc2: Tensor | float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """PyTorch's Adam/AdamW with bias corrections bc1 = 1 - beta1**t, bc2 = 1 - beta2**t:
    (new param, new exp_avg, new exp_avg_sq, the denominator's second moment: v, or max(vmax, v))."""
    p = param
    if weight_decay and decoupled:
        p = M.mul(p, 1.0 - lr * weight_decay)
    elif weight_decay:
        g = M.add(g, M.mul(param, weight_decay))
    m = M.add(M.mul(exp_avg, beta1), M.mul(g, 1.0 - beta1))
    v = M.add(M.mul(exp_avg_sq, beta2), M.mul(M.mul(g, g), 1.0 - beta2))
    most = v if vmax is None else M.maximum(vmax, v)
    root_bc2 = math.sqrt(bc2) if isinstance(bc2, float) else M.sqrt(bc2)
    denom = M.add(M.div(M.sqrt(most), root_bc2), eps)
    step_size = lr / bc1 if isinstance(bc1, float) else M.mul(M.reciprocal(bc1), lr)
    return M.sub(p, M.mul(M.div(m, denom), step_size)), m, v, most


@register("adam_step")
def adam_step(param: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, *, lr: float, beta1: float,
              beta2: float, eps: float, weight_decay: float, decoupled: bool, step: int) -> None:
    bc1, bc2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
    p, m, v, _ = _adam_update(param, grad, exp_avg, exp_avg_sq, None, lr, beta1, beta2, eps, weight_decay,
                              decoupled, bc1, bc2)
    write(exp_avg, m)
    write(exp_avg_sq, v)
    write(param, p)


def _bias_correction(beta: float, t: Tensor) -> Tensor:
    """1 - beta**t on the device, as -expm1(t log beta) (1 - beta**t cancels in float32 near t = 1)."""
    if beta <= 0:
        return M.add(M.mul(t, 0.0), 1.0)  # 0**t == 0 for every step taken
    return M.neg(M.expm1(M.mul(t, math.log(beta))))


@register("adam_step_dev_")
def adam_step_dev_(*tensors: Tensor, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                   decoupled: bool, maximize: bool) -> None:
    param, grad, exp_avg, exp_avg_sq, *vmaxes, step, found_inf = tensors  # max_exp_avg_sq*: [] or [vmax]
    vmax = vmaxes[0] if vmaxes else None
    skip = M.ne(found_inf.reshape(()), 0.0)
    t = M.add(M.cast(step.reshape(()), param.dtype), 1.0)
    g = M.neg(grad) if maximize else grad
    p, m, v, most = _adam_update(param, g, exp_avg, exp_avg_sq, vmax, lr, beta1, beta2, eps, weight_decay,
                                 decoupled, _bias_correction(beta1, t), _bias_correction(beta2, t))
    write(exp_avg, M.where(skip, exp_avg, m))
    write(exp_avg_sq, M.where(skip, exp_avg_sq, v))
    if vmax is not None:
        write(vmax, M.where(skip, vmax, most))
    write(param, M.where(skip, param, p))


@register("adam_step_count_")
def adam_step_count_(*tensors: Tensor) -> None:
    *steps, found_inf = tensors
    taken = M.eq(found_inf.reshape(()), 0.0)
    for s in steps:
        write(s, M.where(taken, M.add(s, 1.0), s))


def _unscale(grad: Tensor, found_inf: Tensor, inv_scale: Tensor) -> Tensor:
    """grad * inv_scale into grad (computed in float32, rounded to grad's dtype); returns the new flag."""
    wide = grad if grad.dtype == float32 else M.cast(grad, float32)
    write(grad, M.mul(wide, inv_scale.reshape(())))
    bad = M.gt(total(M.cast(M.logical_not(M.isfinite(wide)), float32)).reshape(()), 0.0)
    return M.where(bad, M.maximum(found_inf, 1.0), found_inf)


@register("amp_unscale_check_")
def amp_unscale_check_(grad: Tensor, found_inf: Tensor, inv_scale: Tensor) -> None:
    write(found_inf, _unscale(grad, found_inf, inv_scale))


@register("amp_unscale_check_multi_")
def amp_unscale_check_multi_(*tensors: Tensor) -> None:
    *grads, found_inf, inv_scale = tensors
    flag = found_inf
    for g in grads:
        flag = _unscale(g, flag, inv_scale)
    write(found_inf, flag)


@register("amp_update_scale_")
def amp_update_scale_(scale: Tensor, growth_tracker: Tensor, found_inf: Tensor, *, growth_factor: float,
                      backoff_factor: float, growth_interval: int) -> None:
    inf = M.ne(found_inf.reshape(()), 0.0)
    counted = M.add(growth_tracker, 1)
    grow = M.logical_and(M.logical_not(inf), M.ge(counted, const(growth_interval, counted)))
    grown = M.mul(scale, growth_factor)
    # a scale that would overflow float32 stays where it is (PyTorch's rule)
    grown = M.where(M.le(M.abs(grown), 3.4028234663852886e38), grown, scale)
    write(scale, M.where(inf, M.mul(scale, backoff_factor), M.where(grow, grown, scale)))
    write(growth_tracker, M.where(M.logical_or(inf, grow), M.mul(counted, 0), counted))
