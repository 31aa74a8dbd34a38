"""Composite ops: defined by schemas in rumus_contracts (so the conformance suite tests them), built
here from kernels, so their gradients come from the primitives' formulas."""

from __future__ import annotations

from typing import Any

from . import _math as M
from . import ops
from ._dispatch import COMPOSITES
from ._tensor_base import Tensor
from .ops import get as _op


def _count(x: Tensor, dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


def mean(x: Tensor, dims: tuple[int, ...] = ()) -> Tensor:
    ops.get("mean").schema.shape([x.shape], {"dims": dims})
    if not x.dtype.is_floating:
        from rumus_contracts import RumusError
        raise RumusError(f"mean: needs a floating-point tensor, got {x.dtype}; cast it with .float()")
    return M.div(_op("sum")(x, dims=dims), float(_count(x, dims)))


def _safe_scale(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    """The largest magnitude per reduced slice, held constant for autograd; 1 where it is 0, infinite
    or NaN (which then propagate as they would unscaled)."""
    big = _op("amax")(M.abs(t.detach()), dims=dims)
    return M.where(M.logical_and(M.isfinite(big), M.ne(big, 0)), big, M._t(1, big))


def _scaled_spread(x: Tensor, dims: tuple[int, ...], correction: int) -> tuple[Tensor, Tensor]:
    """(scale, the variance of the centred x / scale) per reduced slice: scale**2 * spread is var(x), but
    no square overflows (PyTorch: std([1e20, -1e20]) in float32 is 1.414e20, var is inf). x is centred
    before it is scaled, so a slice far from 0 keeps its spread's digits and a constant one centres to
    exactly 0; a mean whose sum overflows is taken over x / max|x| instead."""
    plain = mean(x, dims)
    big = _safe_scale(x, dims)
    centre = M.where(M.isfinite(plain), plain, M.mul(mean(M.div(x, big), dims), big))
    centred = M.sub(x, centre)
    scale = _safe_scale(centred, dims)
    y = M.div(centred, scale)
    spread = M.div(_op("sum")(M.mul(y, y), dims=dims), float(max(_count(x, dims) - correction, 0)))
    return scale, spread


def var(x: Tensor, dims: tuple[int, ...] = (), correction: int = 1) -> Tensor:
    scale, spread = _scaled_spread(x, dims, correction)
    return M.mul(M.mul(scale, spread), scale)  # scale * scale alone may overflow where the variance does not


def std(x: Tensor, dims: tuple[int, ...] = (), correction: int = 1) -> Tensor:
    scale, spread = _scaled_spread(x, dims, correction)
    return M.mul(scale, M.sqrt(spread))


def logsumexp(x: Tensor, dims: tuple[int, ...] = ()) -> Tensor:
    if not dims:
        return M.add(x, 0.0)
    if any(x.shape[d] == 0 for d in dims):  # the sum of no terms is 0: log gives -inf, as in PyTorch
        return M.log(_op("sum")(M.exp(x), dims=dims))
    m = _op("amax")(x.detach(), dims=dims)  # the shift is a constant: gradients flow through exp/log only
    # An infinite max would make x - m NaN (inf - inf); shift by 0 there instead, as PyTorch does, so a
    # slice of -inf gives -inf and a slice holding +inf gives +inf. NaN still propagates.
    m = M.where(M.eq(M.abs(m), float("inf")), 0.0, m)
    return M.add(M.log(_op("sum")(M.exp(M.sub(x, m)), dims=dims)), m)


COMPOSITES.update({"mean": mean, "var": var, "std": std, "logsumexp": logsumexp})
_: Any = None
