"""Gradient clipping without host round trips: the total norm stays a device tensor, the scale factor is
clamped on the device, and nothing is read back unless the caller asks (float(norm), error_if_nonfinite)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from rumus_contracts import RumusError

from ... import _math as M
from ...autograd.grad_mode import no_grad
from ...tensor import Tensor

Params = Tensor | Iterable[Tensor]


def _grads(parameters: Params) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in params if p.grad is not None]


def get_total_norm(tensors: Params, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The norm of all tensors together, as a 0-d tensor on their device (one host sync only with
    error_if_nonfinite)."""
    ts = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not ts:
        from ... import _creation
        return _creation.zeros(())
    norm_type = float(norm_type)
    with no_grad():
        if norm_type == math.inf:
            parts = [M.amax(M.abs(t)) for t in ts]
            total = parts[0] if len(parts) == 1 else M.amax(M.stack(parts))
        else:
            if norm_type == 2.0:
                parts = [M.sum(M.mul(t, t)) for t in ts]
            else:
                parts = [M.sum(M.pow(M.abs(t), norm_type)) for t in ts]
            acc = parts[0] if len(parts) == 1 else M.sum(M.stack(parts))
            total = M.sqrt(acc) if norm_type == 2.0 else M.pow(acc, 1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(float(total.item())):
        raise RumusError(f"the total norm of order {norm_type} for gradients is non-finite, so it cannot be "
                         f"clipped; pass error_if_nonfinite=False to scale by it anyway")
    return total


def clip_grad_norm_(parameters: Params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their total norm is at most max_norm; returns the total norm
    (before clipping) as a 0-d device tensor, like PyTorch. No host sync: the factor
    min(max_norm / (norm + 1e-6), 1) is computed and applied on the device."""
    grads = _grads(parameters)
    if not grads:
        from ... import _creation
        return _creation.zeros(())
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    with no_grad():
        coef = M.clamp(M.div(float(max_norm), M.add(total, 1e-6)), max=1.0)
        for g in grads:
            g.mul_(coef if coef.dtype == g.dtype else coef.to(g.dtype))
    return total


def clip_grad_value_(parameters: Params, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value], in place."""
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-float(clip_value), float(clip_value))
