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


def var(x: Tensor, dims: tuple[int, ...] = (), correction: int = 1) -> Tensor:
    centred = M.sub(x, mean(x, dims))
    return M.div(_op("sum")(M.mul(centred, centred), dims=dims), float(max(_count(x, dims) - correction, 0)))


def std(x: Tensor, dims: tuple[int, ...] = (), correction: int = 1) -> Tensor:
    return M.sqrt(var(x, dims, correction))


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
