"""amin, prod, argmax, argmin and clamp from the primitive reductions and elementwise ops.

amin and prod fold the reduced elements pairwise (a tree of minimum / mul over the flattened reduced
dims): exact for amin, and prod's gradient through mul is right at zeros too. argmax/argmin take the
first index where the extremum sits (amax, then the smallest matching index via -amax of -index); a NaN
counts as the extremum, as in PyTorch."""

from __future__ import annotations

import math
from collections.abc import Callable

from rumus_contracts import int64

from .. import _math as M
from .._tensor_base import Tensor
from . import register
from ._helpers import arange_like, in_float32, op


def _fold(x: Tensor, dims: tuple[int, ...], combine: Callable[[Tensor, Tensor], Tensor],
          idempotent: bool) -> Tensor:
    """combine over dims (keepdim shape) as a tree: the reduced dims moved last and flattened, then halves
    combined until one element is left. An odd count overlaps the halves' middle element (idempotent
    combines) or carries the last element into the first slot."""
    if not dims:
        return op("copy")(x)
    kept = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(1 if d in dims else x.shape[d] for d in range(x.ndim))
    n = math.prod(x.shape[d] for d in dims)
    y = x.permute((*kept, *dims)).reshape((*[x.shape[d] for d in kept], n))
    while n > 1:
        h = n // 2
        if n % 2 and idempotent:
            y = combine(y[..., :h + 1], y[..., h:])
            n = h + 1
        elif n % 2:
            head = combine(y[..., :h], y[..., h:2 * h])
            last = combine(head[..., :1], y[..., 2 * h:])
            y = M.cat([last, head[..., 1:]], dim=-1) if h > 1 else last
            n = h
        else:
            y = combine(y[..., :h], y[..., h:])
            n = h
    return y.reshape(out_shape)


@register("amin", grad="formula")
def amin(x: Tensor, *, dims: tuple[int, ...]) -> Tensor:
    return _fold(x, tuple(dims), M.minimum, idempotent=True)


@register("prod")
@in_float32
def prod(x: Tensor, *, dims: tuple[int, ...]) -> Tensor:
    dims = tuple(dims)
    if x.dtype.is_floating:
        if any(x.shape[d] == 0 for d in dims):  # the empty product
            return M.add(M.mul(op("sum")(x, dims=dims), 0.0), 1.0)
        return _fold(x, dims, M.mul, idempotent=False)
    wide = x if x.dtype == int64 else M.cast(x, int64)  # integer products are int64, like sum's
    if any(x.shape[d] == 0 for d in dims):
        return M.add(M.mul(op("sum")(wide, dims=dims), 0), 1)
    return _fold(wide, dims, M.mul, idempotent=False)


def _first_index(x: Tensor, dim: int, extremum: Tensor) -> Tensor:
    """The first index along dim where x equals `extremum` (or is NaN: NaN is every extremum)."""
    n = x.shape[dim]
    hit = M.eq(x, extremum)
    if x.dtype.is_floating:
        hit = M.logical_or(hit, M.isnan(x))
    shape = [1] * x.ndim
    shape[dim] = n
    idx = arange_like(n, x, int64).reshape(tuple(shape))
    # the smallest hit index is -max(-index) over the hits; a miss counts as -n
    neg = M.where(hit, M.neg(idx), -n)
    return M.neg(op("amax")(neg, dims=(dim,)))


def _arg(x: Tensor, dim: int, find_max: bool) -> Tensor:
    if x.ndim == 0:
        return M.cast(M.mul(x, 0), int64)
    ext = op("amax")(x, dims=(dim,)) if find_max else amin(x, dims=(dim,))
    return _first_index(x, dim, ext)


@register("argmax")
def argmax(x: Tensor, *, dim: int) -> Tensor:
    return _arg(x, dim, True)


@register("argmin")
def argmin(x: Tensor, *, dim: int) -> Tensor:
    return _arg(x, dim, False)


@register("clamp", grad="formula")
def clamp(x: Tensor, *, min: float | None, max: float | None) -> Tensor:
    out = x
    if min is not None:
        out = M.maximum(out, _bound(min, x))
    if max is not None:
        out = M.minimum(out, _bound(max, x))
    return op("copy")(out) if out is x else out


def _bound(value: float, like: Tensor) -> float | int:
    """A bound as x's dtype compares with it (an integer tensor's bound truncated, as the kernel casts it)."""
    return value if like.dtype.is_floating else int(math.trunc(value))
