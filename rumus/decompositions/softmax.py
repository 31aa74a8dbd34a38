"""softmax and log_softmax, max-shifted, and their backward ops, from amax / sum / exp / log. The shift
is detached: the results do not depend on it, and the op's own formula (softmax_backward, which itself
decomposes) is the gradient, as on the kernel path."""

from __future__ import annotations

from .. import _math as M
from .._tensor_base import Tensor
from . import register
from ._helpers import in_float32, op


def _shifted(x: Tensor, dim: int) -> Tensor:
    return M.sub(x, op("amax")(x, dims=(dim,)).detach())


@register("softmax", grad="formula")
@in_float32
def softmax(x: Tensor, *, dim: int) -> Tensor:
    if x.ndim == 0:
        return M.add(M.mul(x, 0.0), 1.0) if x.numel() else op("copy")(x)
    if x.numel() == 0:
        return op("copy")(x)
    e = M.exp(_shifted(x, dim))
    return M.div(e, op("sum")(e, dims=(dim,)))


@register("log_softmax", grad="formula")
@in_float32
def log_softmax(x: Tensor, *, dim: int) -> Tensor:
    if x.ndim == 0:
        return M.mul(x, 0.0)
    if x.numel() == 0:
        return op("copy")(x)
    s = _shifted(x, dim)
    return M.sub(s, M.log(op("sum")(M.exp(s), dims=(dim,))))


@register("softmax_backward")
@in_float32
def softmax_backward(grad: Tensor, y: Tensor, *, dim: int) -> Tensor:
    if grad.ndim == 0:
        return M.mul(grad, 0.0)
    return M.mul(y, M.sub(grad, op("sum")(M.mul(grad, y), dims=(dim,))))


@register("log_softmax_backward")
@in_float32
def log_softmax_backward(grad: Tensor, y: Tensor, *, dim: int) -> Tensor:
    if grad.ndim == 0:
        return M.mul(grad, 0.0)
    return M.sub(grad, M.mul(M.exp(y), op("sum")(grad, dims=(dim,))))
