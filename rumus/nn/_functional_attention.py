"""Scaled dot-product attention and attention masks (rumus.nn.functional).

Masks become one additive bias (0 where a query may attend, -inf where not) added to the scores, so the
backward of masking is free (an add). Causal biases are cached per (L, S, offset, dtype, device): a
training loop builds its mask once, not once per step.

When the fused kernel applies (`flash_attend`: 3-D/4-D inputs of one head dim <= 128, a dtype of FLASH_DTYPES
(float16/bfloat16 too), a backend with a flash_attention kernel, no gradient wanted for a float mask) attention
runs as one
flash_attention op — O(L) memory instead of the [L, S] weights — and its dropout mask is the one the
composite path would draw from the same seed. Otherwise the composite path below runs. Under autocast q, k
and v are cast first as the flash_attention schema's class says ("lower", PyTorch's rule for this op), so
the fused kernel runs in float16/bfloat16 and the masks are built in that dtype.
"""

from __future__ import annotations

import math

import numpy as np

from rumus_contracts import Device, DType, RumusError, ShapeError
from rumus_contracts.ops.attention import FLASH_DTYPES, MAX_HEAD_DIM

from .. import _creation, _dispatch, _runtime
from .. import _math as M
from .. import _views
from .._dispatch import COMPOSITES, scalar_tensor
from .._thread_state import autocast_state
from ..amp.policy import for_op
from ..autograd.grad_mode import is_grad_enabled
from ..ops import get as _op
from ..tensor import Tensor
from ._functional_act import dropout, next_seed

# rumus.nn.functional star-imports these.
__all__ = ["causal_mask", "generate_square_subsequent_mask", "scaled_dot_product_attention"]

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


_HAS_FLASH: dict[tuple[str, DType], bool] = {}


def _has_flash(t: Tensor) -> bool:
    key = (t.device.backend, t.dtype)
    hit = _HAS_FLASH.get(key)
    if hit is None:
        kernels = _runtime.plugins().kernels
        hit = _HAS_FLASH[key] = all(kernels.find(op, t.device.backend, t.dtype) is not None
                                    for op in ("flash_attention", "flash_attention_backward"))
    return hit


def flash_attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None, key_bias: Tensor | None = None,
                 is_causal: bool = False, dropout_p: float = 0.0, scale: float | None = None) -> Tensor | None:
    """The fused flash_attention op when it applies, else None (the caller runs the composite path).

    q [N, L, E] or [N, H, L, E], k and v shaped like q with S for L; bias: an additive float mask
    broadcastable to the scores (no gradient taken); key_bias: additive [N, S] (key padding)."""
    if q.ndim not in (3, 4) or k.shape != v.shape or k.shape[:-2] != q.shape[:-2] or k.shape[-1] != q.shape[-1]:
        return None
    if q.dtype not in FLASH_DTYPES or not 0.0 <= dropout_p < 1.0 or not 1 <= q.shape[-1] <= MAX_HEAD_DIM:
        return None
    if any(d == 0 for d in (*q.shape, k.shape[-2])) or not _has_flash(q):
        return None
    tracer = _dispatch._tracer
    if tracer is not None and tracer.here():  # ONNX export: ONNX has no fused attention; trace the composite
        return None
    zero = scalar_tensor(0.0, q.dtype, q.device)
    masks = []
    for m in (bias, key_bias):
        if m is None:
            masks.append(zero)
        elif m.dtype != q.dtype or m.device != q.device or (m.requires_grad and is_grad_enabled()):
            return None
        else:
            masks.append(m)
    unbatched_heads = q.ndim == 3
    if unbatched_heads:  # [N, L, E] as one head: a bias with a batch dim gains the head dim too
        q, k, v = (_views.unsqueeze(t, 1) for t in (q, k, v))
        if masks[0].ndim == 3:
            masks[0] = _views.unsqueeze(masks[0], 1)
    b, h, length, src = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    if masks[0].ndim > 4 or masks[1].ndim > 2 or not _fits(masks[0].shape, (b, h, length, src)) \
            or not _fits(masks[1].shape, (b, src)):
        return None
    seed = next_seed() if dropout_p > 0.0 else 0
    out, _ = _op("flash_attention").multi(q, k, v, masks[0], masks[1], is_causal=bool(is_causal), scale=scale,
                                          dropout_p=float(dropout_p), seed=seed, offset=0)
    return _views.squeeze(out, 1) if unbatched_heads else out


def _fits(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    return len(shape) <= len(to) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(to)))


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
    if autocast_state.enabled:
        query, key, value = for_op("flash_attention", query, key, value)
    L, S = query.shape[-2], key.shape[-2]
    mask = None if attn_mask is None else mask_to_bias(attn_mask, query)
    fused = flash_attend(query, key, value, mask, None, is_causal, dropout_p, scale)
    if fused is not None:
        return fused
    bias = causal_bias(L, S, 0, query.dtype, query.device) if is_causal else mask
    out, _ = attend(query, key, value, bias, dropout_p, scale)
    return out


COMPOSITES["scaled_dot_product_attention"] = lambda q, k, v, is_causal=False, scale=None: \
    scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
