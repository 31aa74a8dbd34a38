"""Decomposition of dropout (rumus_contracts.ops.nn) and the keep mask that flash_attention's shares.

The keep mask is the contract's counter-based hash of (seed, offset, element index). The primitives
have no 32-bit integer arithmetic to evaluate it on the device, so the mask is computed on the host by
the contract's own function (`dropout_keep`, the one every kernel is held to) and uploaded once per
call: exact on every backend, at the cost of one transfer of numel bools.
"""

from __future__ import annotations

from rumus_contracts import Device, bool_
from rumus_contracts.ops.nn import dropout_keep

from .. import _math as M
from .._creation import from_host
from .._tensor_base import Tensor
from . import register


def keep_mask(shape: tuple[int, ...], p: float, seed: int, offset: int, device: Device) -> Tensor:
    """bool tensor of `shape`: the elements dropout keeps (row-major element index)."""
    n = 1
    for s in shape:
        n *= s
    return from_host(dropout_keep(n, float(p), int(seed), int(offset)).reshape(shape), bool_, device)


@register("dropout")
def dropout(x: Tensor, *, p: float, seed: int, offset: int) -> Tensor:
    keep = keep_mask(x.shape, p, seed, offset, x.device)
    return M.where(keep, M.mul(x, 1.0 / (1.0 - float(p))), 0.0)
