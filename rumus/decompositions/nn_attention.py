"""Decompositions of flash_attention and flash_attention_backward (rumus_contracts.ops.attention) as
plain scaled dot-product attention: the [B, H, L, S] scores are materialised (the fused kernels exist
to avoid that; a backend without them trades memory for having the op at all).

    s = scale * q k^T + bias + key_bias      (-inf above the diagonal if is_causal, top-left aligned)
    P = softmax(s) by rows, lse = logsumexp(s); a fully masked row gives P = 0 and lse = -inf
    out = (P * keep / (1 - p)) v             (the dropout op's keep mask over [B, H, L, S])

The backward recomputes P from q, k and the biases (not from the lse input), so it is exact to the
float64 reference whatever rounding lse and out went through, and D = rowsum(P * dP) equals
dout . out. float16 and bfloat16 inputs are computed in float32 and rounded once, as the kernels do.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from rumus_contracts import Device, RumusError, bool_
from rumus_contracts.ops.attention import default_scale
from rumus_contracts.ops.nn import dropout_keep

from .. import _dispatch
from .. import _math as M
from .. import _views
from .._creation import from_host
from .._tensor_base import Tensor
from ..ops import get as _op
from . import register
from ._precision import narrow, widen


@lru_cache(maxsize=32)
def _causal(length: int, keys: int, device: Device) -> Tensor:
    return from_host(np.tril(np.ones((length, keys), dtype=bool)), bool_, device)


def _key_bias4(key_bias: Tensor) -> Tensor:
    """key_bias (broadcastable to [B, S]) as [B or 1, 1, 1, S or 1]."""
    shape = (1,) * (2 - key_bias.ndim) + tuple(key_bias.shape)
    return _views.reshape(key_bias, (shape[0], 1, 1, shape[1]))


def _probs(q: Tensor, k: Tensor, bias: Tensor, key_bias: Tensor, is_causal: bool,
           scale: float | None) -> tuple[Tensor, Tensor]:
    """(P [B, H, L, S], lse [B, H, L, 1]) with fully masked rows (a non-finite row max) at P = 0, lse = -inf."""
    c = default_scale(q.shape[-1], scale)
    s = M.mul(_op("matmul")(q, _views.matrix_transpose(k)), c)
    s = M.add(M.add(s, bias), _key_bias4(key_bias))
    if is_causal:
        s = M.where(_causal(q.shape[2], k.shape[2], q.device), s, float("-inf"))
    top = _op("amax")(s.detach(), dims=(3,))  # the shift is a constant: gradients flow through exp only
    dead = M.logical_not(M.isfinite(top))
    shift = M.where(dead, 0.0, top)
    e = M.exp(M.sub(s, shift))
    total = M.where(dead, 1.0, _op("sum")(e, dims=(3,)))
    p = M.where(dead, 0.0, M.div(e, total))
    lse = M.where(dead, float("-inf"), M.add(M.log(total), shift))
    return p, lse


def _keep_mask(shape: tuple[int, ...], p: float, seed: int, offset: int, device: Device) -> Tensor:
    """The dropout op's keep mask over `shape` (row-major element index), from the contract's own function
    on the host: the counter-based hash needs 32-bit xor and shifts, which the primitives do not have.
    rm.compile's replay draws a new seed for each recorded dropout kernel, but an uploaded mask would be
    replayed as captured (the same mask on every step), so a capture refuses it."""
    if _dispatch._capture is not None:
        raise RumusError("flash_attention with dropout_p > 0 cannot be captured by rm.compile on a backend "
                         "without its flash_attention kernels: the decomposition's keep mask is computed on the "
                         "host and would be replayed unchanged. Compile with dropout_p=0 or run it eagerly")
    n = 1
    for s in shape:
        n *= s
    return from_host(dropout_keep(n, float(p), int(seed), int(offset)).reshape(shape), bool_, device)


def _dropped(p: Tensor, dropout_p: float, seed: int, offset: int) -> Tensor:
    """P with the dropout op's mask over [B, H, L, S] applied and the survivors scaled by 1 / (1 - p)."""
    if float(dropout_p) == 0.0:
        return p
    keep = _keep_mask(tuple(p.shape), dropout_p, seed, offset, p.device)
    return M.where(keep, M.mul(p, 1.0 / (1.0 - float(dropout_p))), 0.0)


@register("flash_attention")
def flash_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, key_bias: Tensor, *, is_causal: bool,
                    scale: float | None, dropout_p: float, seed: int, offset: int) -> tuple[Tensor, Tensor]:
    dtype = q.dtype
    # no gradient flows to the biases, as in the op's contract (its differentiable inputs are q, k, v)
    q, k, v, bias, key_bias = widen(q, k, v, bias.detach(), key_bias.detach())
    p, lse = _probs(q, k, bias, key_bias, is_causal, scale)
    out = _op("matmul")(_dropped(p, dropout_p, seed, offset), v)
    return narrow(out, dtype), narrow(_views.reshape(lse, tuple(q.shape[:3])), dtype)


@register("flash_attention_backward")
def flash_attention_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor, bias: Tensor,
                             key_bias: Tensor, *, is_causal: bool, scale: float | None, dropout_p: float, seed: int,
                             offset: int) -> tuple[Tensor, Tensor, Tensor]:
    dtype = q.dtype
    q, k, v, dout, bias, key_bias = widen(q, k, v, dout, bias, key_bias)
    p, _ = _probs(q, k, bias, key_bias, is_causal, scale)
    c = default_scale(q.shape[-1], scale)
    dv = _op("matmul")(_views.matrix_transpose(_dropped(p, dropout_p, seed, offset)), dout)
    dp = _dropped(_op("matmul")(dout, _views.matrix_transpose(v)), dropout_p, seed, offset)
    ds = M.mul(p, M.sub(dp, _op("sum")(M.mul(p, dp), dims=(3,))))
    dq = M.mul(_op("matmul")(ds, k), c)
    dk = M.mul(_op("matmul")(_views.matrix_transpose(ds), q), c)
    return narrow(dq, dtype), narrow(dk, dtype), narrow(dv, dtype)
