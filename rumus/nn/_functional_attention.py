"""Scaled dot-product attention and attention masks (rumus.nn.functional).

Masks become one additive bias (0 where a query may attend, -inf where not) added to the scores, so the
backward of masking is free (an add). Causal biases are cached per (L, S, offset, dtype, device): a
training loop builds its mask once, not once per step.
"""

from __future__ import annotations

import math

import numpy as np

from rumus_contracts import Device, DType, RumusError, ShapeError

from .. import _creation
from .. import _math as M
from .. import _views
from .._dispatch import COMPOSITES, scalar_tensor
from ..tensor import Tensor
from ._functional_act import dropout

_CAUSAL: dict[tuple[int, int, int, str, Device], Tensor] = {}


def causal_mask(L: int, S: int | None = None, start_pos: int = 0, device: str | Device | None = None) -> Tensor:
    """Bool [L, S] mask, True where query i (at position start_pos + i) may attend key j (j <= start_pos + i).

    S defaults to start_pos + L (a KV cache holding every earlier token); start_pos = 0 is PyTorch's
    top-left aligned `is_causal`."""
    S = start_pos + L if S is None else S
    allowed = np.arange(S)[None, :] <= np.arange(L)[:, None] + start_pos
    return _creation.tensor(allowed, device=device)


def causal_bias(L: int, S: int, start_pos: int, dtype: DType, device: Device) -> Tensor:
    """The additive form of causal_mask (0 / -inf), cached."""
    key = (L, S, start_pos, dtype.name, device)
    hit = _CAUSAL.get(key)
    if hit is None:
        allowed = np.arange(S)[None, :] <= np.arange(L)[:, None] + start_pos
        hit = _creation.from_host(np.where(allowed, 0.0, -np.inf), dtype, device)
        if len(_CAUSAL) >= 64:
            _CAUSAL.clear()
        _CAUSAL[key] = hit
    return hit


def generate_square_subsequent_mask(sz: int, device: str | Device | None = None, dtype: object = None) -> Tensor:
    """PyTorch's nn.Transformer.generate_square_subsequent_mask: float [sz, sz], -inf above the diagonal."""
    from rumus_contracts import float32, parse_dtype
    dt = parse_dtype(dtype) if dtype is not None else float32
    dev = Device.parse(device) if device is not None else _creation.empty(0).device
    return causal_bias(sz, sz, 0, dt, dev)


def mask_to_bias(mask: Tensor, like: Tensor, true_means_masked: bool = False) -> Tensor:
    """A bool mask (True = may attend; with true_means_masked, True = may not) or a float mask as an additive
    bias in like's dtype."""
    if mask.dtype.is_bool:
        zero = scalar_tensor(0.0, like.dtype, like.device)
        ninf = scalar_tensor(float("-inf"), like.dtype, like.device)
        return M.where(mask, ninf, zero) if true_means_masked else M.where(mask, zero, ninf)
    if not mask.dtype.is_floating:
        raise RumusError(f"attention masks must be bool or floating point, got {mask.dtype}")
    return mask if mask.dtype == like.dtype else mask.to(like.dtype)


def attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None, dropout_p: float = 0.0,
           scale: float | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q k^T * scale + bias) v and the attention weights; q [..., L, E], k [..., S, E], v [..., S, Ev]."""
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = M.matmul(M.mul(q, s), k.mT)
    if bias is not None:
        scores = M.add(scores, bias)
    weights = M.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return M.matmul(weights, v), weights


def _repeat_heads(t: Tensor, times: int) -> Tensor:
    """[..., H, S, E] -> [..., H * times, S, E], each head repeated `times` times in a row (grouped-query)."""
    if times == 1:
        return t
    shape = t.shape
    expanded = _views.expand(_views.unsqueeze(t, -3), (*shape[:-2], times, *shape[-2:]))
    return expanded.reshape(*shape[:-3], shape[-3] * times, *shape[-2:])


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """PyTorch's F.scaled_dot_product_attention: bool masks (True = take part) or float masks (added), a
    top-left aligned causal mask, dropout on the weights, grouped-query heads with enable_gqa."""
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError(f"scaled_dot_product_attention: q, k, v need >= 2 dims, got {query.shape}, {key.shape}, "
                         f"{value.shape}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: q {query.shape}, k {key.shape}, v {value.shape} do not "
                         f"fit (q and k share the last dim, k and v the sequence dim)")
    if is_causal and attn_mask is not None:
        raise RumusError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        if query.shape[-3] % key.shape[-3]:
            raise ShapeError(f"scaled_dot_product_attention: {query.shape[-3]} query heads are not a multiple of "
                             f"{key.shape[-3]} key/value heads")
        times = query.shape[-3] // key.shape[-3]
        key, value = _repeat_heads(key, times), _repeat_heads(value, times)
    L, S = query.shape[-2], key.shape[-2]
    bias = None
    if is_causal:
        bias = causal_bias(L, S, 0, query.dtype, query.device)
    elif attn_mask is not None:
        bias = mask_to_bias(attn_mask, query)
    out, _ = attend(query, key, value, bias, dropout_p, scale)
    return out


COMPOSITES["scaled_dot_product_attention"] = lambda q, k, v, is_causal=False, scale=None: \
    scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
