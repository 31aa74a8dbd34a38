"""Decompositions of the normalization ops and their backward ops (rumus_contracts.ops.nn_norm).

Statistics are two-pass (mean, then the mean of squared deviations), as the float64 references are:
a channel of constant 1e4 gives a variance of exactly 0, not a cancellation residue. float16 and
bfloat16 inputs are computed in float32 and rounded once at the end, as the kernels do.

batch_norm with training=True recomputes its statistics from x instead of reading the mean and var
inputs (which the contract says are batch_norm_stats(x)): the values are the same, and gradients
then flow through the statistics, as the op's backward treats them. In eval mode the statistics are
constants (the op's differentiable inputs are x, weight and bias).
"""

from __future__ import annotations

from .. import _math as M
from .. import _views
from .._tensor_base import Tensor
from ..ops import get as _op
from . import register
from ._precision import narrow, widen


def _count(x: Tensor, dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


def _sum(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """Sum over dims, keepdim shape (the identity for no dims)."""
    return _op("sum")(x, dims=dims)


def _mean(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return M.div(_sum(x, dims), float(max(_count(x, dims), 1)))


def _standardize(x: Tensor, dims: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor]:
    """(xhat, rstd): (x - mean) * rstd with rstd = 1 / sqrt(biased var + eps), statistics over dims."""
    centred = M.sub(x, _mean(x, dims))
    rstd = M.rsqrt(M.add(_mean(M.mul(centred, centred), dims), eps))
    return M.mul(centred, rstd), rstd


def _norm_backward(xhat: Tensor, rstd: Tensor, gxhat: Tensor, dims: tuple[int, ...], centred: bool) -> Tensor:
    """d/dx of xhat = (x - mean) * rstd (centred) or x * rstd, given the gradient gxhat of xhat."""
    dot = _mean(M.mul(gxhat, xhat), dims)
    base = M.sub(gxhat, _mean(gxhat, dims)) if centred else gxhat
    return M.mul(rstd, M.sub(base, M.mul(xhat, dot)))


def _trailing(x: Tensor, weight: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(normalized dims, leading dims) for a weight covering x's trailing dims."""
    k = x.ndim - weight.ndim
    return tuple(range(k, x.ndim)), tuple(range(k))


def _over_lead(t: Tensor, lead: tuple[int, ...], shape: tuple[int, ...]) -> Tensor:
    """t summed over its leading dims, as a tensor of the weight's shape."""
    return _views.reshape(_sum(t, lead), shape)


# ---- layer_norm / rms_norm: statistics over the trailing weight.ndim dims ------------------------

@register("layer_norm")
def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, *, eps: float) -> Tensor:
    dtype = x.dtype
    x, weight, bias = widen(x, weight, bias)
    xhat, _ = _standardize(x, _trailing(x, weight)[0], eps)
    return narrow(M.add(M.mul(xhat, weight), bias), dtype)


@register("layer_norm_backward")
def layer_norm_backward(grad: Tensor, x: Tensor, weight: Tensor, *, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    dtype = x.dtype
    grad, x, weight = widen(grad, x, weight)
    dims, lead = _trailing(x, weight)
    xhat, rstd = _standardize(x, dims, eps)
    gx = _norm_backward(xhat, rstd, M.mul(grad, weight), dims, centred=True)
    gw = _over_lead(M.mul(grad, xhat), lead, weight.shape)
    gb = _over_lead(grad, lead, weight.shape)
    return narrow(gx, dtype), narrow(gw, dtype), narrow(gb, dtype)


def _rms(x: Tensor, dims: tuple[int, ...], eps: float) -> Tensor:
    return M.rsqrt(M.add(_mean(M.mul(x, x), dims), eps))


@register("rms_norm")
def rms_norm(x: Tensor, weight: Tensor, *, eps: float) -> Tensor:
    dtype = x.dtype
    x, weight = widen(x, weight)
    return narrow(M.mul(M.mul(x, _rms(x, _trailing(x, weight)[0], eps)), weight), dtype)


@register("rms_norm_backward")
def rms_norm_backward(grad: Tensor, x: Tensor, weight: Tensor, *, eps: float) -> tuple[Tensor, Tensor]:
    dtype = x.dtype
    grad, x, weight = widen(grad, x, weight)
    dims, lead = _trailing(x, weight)
    rinv = _rms(x, dims, eps)
    xhat = M.mul(x, rinv)
    gx = _norm_backward(xhat, rinv, M.mul(grad, weight), dims, centred=False)
    return narrow(gx, dtype), narrow(_over_lead(M.mul(grad, xhat), lead, weight.shape), dtype)


# ---- per-channel ops over x [N, C, *] ------------------------------------------------------------

def _per_channel(p: Tensor, ndim: int) -> Tensor:
    """[C] as [1, C, 1, ...] for an ndim-dim input."""
    return _views.reshape(p, (1, p.shape[0]) + (1,) * (ndim - 2))


def _channel_dims(x: Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.ndim))


def _grouped(x: Tensor, groups: int) -> Tensor:
    n, c = x.shape[0], x.shape[1]
    return _views.reshape(x, (n, groups, c // groups * _count(x, tuple(range(2, x.ndim)))))


@register("group_norm")
def group_norm(x: Tensor, weight: Tensor, bias: Tensor, *, num_groups: int, eps: float) -> Tensor:
    dtype = x.dtype
    x, weight, bias = widen(x, weight, bias)
    xhat = _views.reshape(_standardize(_grouped(x, num_groups), (2,), eps)[0], x.shape)
    return narrow(M.add(M.mul(xhat, _per_channel(weight, x.ndim)), _per_channel(bias, x.ndim)), dtype)


@register("group_norm_backward")
def group_norm_backward(grad: Tensor, x: Tensor, weight: Tensor, *, num_groups: int,
                        eps: float) -> tuple[Tensor, Tensor, Tensor]:
    dtype = x.dtype
    grad, x, weight = widen(grad, x, weight)
    xhat, rstd = _standardize(_grouped(x, num_groups), (2,), eps)
    gxhat = _grouped(M.mul(grad, _per_channel(weight, x.ndim)), num_groups)
    gx = _views.reshape(_norm_backward(xhat, rstd, gxhat, (2,), centred=True), x.shape)
    dims = _channel_dims(x)
    gw = _views.reshape(_sum(M.mul(grad, _views.reshape(xhat, x.shape)), dims), weight.shape)
    gb = _views.reshape(_sum(grad, dims), weight.shape)
    return narrow(gx, dtype), narrow(gw, dtype), narrow(gb, dtype)


def _stats(x: Tensor) -> tuple[Tensor, Tensor]:
    """Per-channel mean and biased variance, keepdim shape [1, C, 1, ...]."""
    dims = _channel_dims(x)
    mean = _mean(x, dims)
    centred = M.sub(x, mean)
    return mean, _mean(M.mul(centred, centred), dims)


@register("batch_norm_stats")
def batch_norm_stats(x: Tensor) -> tuple[Tensor, Tensor]:
    dtype = x.dtype
    (x,) = widen(x)
    mean, var = _stats(x)
    c = (x.shape[1],)
    return narrow(_views.reshape(mean, c), dtype), narrow(_views.reshape(var, c), dtype)


@register("batch_norm")
def batch_norm(x: Tensor, weight: Tensor, bias: Tensor, mean: Tensor, var: Tensor, *, eps: float,
               training: bool) -> Tensor:
    dtype = x.dtype
    x, weight, bias, mean, var = widen(x, weight, bias, mean, var)
    nd = x.ndim
    if training and _count(x, tuple(range(nd))):
        m4, v4 = _stats(x)
    else:
        m4, v4 = _per_channel(mean.detach(), nd), _per_channel(var.detach(), nd)
    scale = M.mul(M.rsqrt(M.add(v4, eps)), _per_channel(weight, nd))
    return narrow(M.add(M.mul(M.sub(x, m4), scale), _per_channel(bias, nd)), dtype)


@register("batch_norm_backward")
def batch_norm_backward(grad: Tensor, x: Tensor, weight: Tensor, mean: Tensor, var: Tensor, *, eps: float,
                        training: bool) -> tuple[Tensor, Tensor, Tensor]:
    dtype = x.dtype
    grad, x, weight, mean, var = widen(grad, x, weight, mean, var)
    nd, dims = x.ndim, _channel_dims(x)
    invstd = M.rsqrt(M.add(var, eps))
    xhat = M.mul(M.sub(x, _per_channel(mean, nd)), _per_channel(invstd, nd))
    gb, gw = _sum(grad, dims), _sum(M.mul(grad, xhat), dims)  # [1, C, 1, ...]
    scale = _per_channel(M.mul(weight, invstd), nd)
    if training:
        m = float(max(_count(x, dims), 1))
        gx = M.mul(scale, M.sub(M.sub(grad, M.div(gb, m)), M.mul(xhat, M.div(gw, m))))
    else:
        gx = M.mul(grad, scale)
    c = weight.shape
    return narrow(gx, dtype), narrow(_views.reshape(gw, c), dtype), narrow(_views.reshape(gb, c), dtype)
