"""MultiheadAttention with PyTorch's parameter layout, and a preallocated KV cache for decoding.

Parameters: in_proj_weight [3E, E] and in_proj_bias [3E] (or q/k/v_proj_weight when kdim/vdim differ from
E), out_proj.weight [E, E] and out_proj.bias, so PyTorch state_dicts load unchanged.

With need_weights=False the attention runs as one fused flash_attention op (O(L) memory, the key-padding
mask kept as an [N, S] bias); asking for the weights keeps the composite path that materialises them.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import RumusError, ShapeError

from .. import _creation
from .. import _math as M
from .. import _views
from ..autograd.function import Function, FunctionCtx
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import functional as F
from . import init
from ._functional_attention import attend, causal_bias, flash_attend, mask_to_bias
from .linear import Linear
from .module import Module
from .parameter import Parameter

# rumus.nn star-imports these.
__all__ = ["KVCache", "MultiheadAttention"]


class _SplitLast(Function):
    """Split the last dim into `parts` equal views; the backward concatenates the parts' gradients (zeros
    for parts that got none) instead of scattering each into a zero tensor of the full size."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        size = x.shape[-1] // parts
        ctx.part = (x.shape[:-1] + (size,), x.dtype, x.device)  # type: ignore[attr-defined]
        return tuple(_views.narrow(x, -1, i * size, size) for i in range(parts))

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Tensor | None) -> tuple[Tensor, None]:
        shape, dtype, device = ctx.part  # type: ignore[attr-defined]
        full = [g if g is not None else _creation.zeros(*shape, dtype=dtype, device=device) for g in grads]
        return M.cat(full, -1), None


class KVCache:
    """Keys and values of earlier tokens, [batch, heads, max_len, head_dim] each, written in place.

    `update(k, v, start_pos)` stores the new tokens' keys/values at start_pos and returns views of
    everything up to them. For inference (under no_grad): nothing flows back through the cache."""

    def __init__(self, batch_size: int, num_heads: int, max_len: int, head_dim: int, dtype: Any = None,
                 device: Any = None) -> None:
        self.k = _creation.zeros(batch_size, num_heads, max_len, head_dim, dtype=dtype, device=device)
        self.v = _creation.zeros(batch_size, num_heads, max_len, head_dim, dtype=dtype, device=device)
        self.max_len = max_len
        self.length = 0

    def update(self, k: Tensor, v: Tensor, start_pos: int) -> tuple[Tensor, Tensor]:
        end = start_pos + k.shape[-2]
        if start_pos < 0 or end > self.max_len:
            raise ShapeError(f"KVCache: positions {start_pos}..{end - 1} do not fit a cache of max_len {self.max_len}")
        if k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]:
            raise ShapeError(f"KVCache: keys of shape {k.shape} do not fit a cache of shape {self.k.shape}")
        with no_grad():
            self.k[:, :, start_pos:end] = k.detach()
            self.v[:, :, start_pos:end] = v.detach()
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def reset(self) -> None:
        self.length = 0


class MultiheadAttention(Module):
    """PyTorch's nn.MultiheadAttention: forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False) -> (output, weights or None)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise RumusError(f"MultiheadAttention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if add_bias_kv or add_zero_attn:
            raise RumusError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        kw = {"device": device, "dtype": dtype}
        self.in_proj_weight: Parameter | None
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_creation.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(_creation.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(_creation.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(_creation.empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        self.in_proj_bias: Parameter | None
        if bias:
            self.in_proj_bias = Parameter(_creation.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)  # type: ignore[arg-type]
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
        if self.out_proj.bias is not None:
            init.constant_(self.out_proj.bias, 0.0)

    # ---- projections ------------------------------------------------------------------------------
    def _bias(self, i: int) -> Tensor | None:
        b = self.in_proj_bias
        return None if b is None else b[i * self.embed_dim:(i + 1) * self.embed_dim]

    def _weight(self, i: int) -> Tensor:
        if self.in_proj_weight is not None:
            return self.in_proj_weight[i * self.embed_dim:(i + 1) * self.embed_dim]
        w: Tensor = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i]
        return w

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """[N, L, E] inputs -> q, k, v as [N, H, L, head_dim] views. The projections run as 2-D GEMMs over
        N * L rows, and as one GEMM when query is key is value (its output split by a node whose backward
        is a single concatenation)."""
        n, length, src_len = query.shape[0], query.shape[1], key.shape[1]
        if query is key and key is value and self.in_proj_weight is not None:
            qkv = F.linear(query.reshape(n * length, self.embed_dim), self.in_proj_weight, self.in_proj_bias)
            q, k, v = _SplitLast.apply(qkv, 3)
        else:
            q = F.linear(query.reshape(n * length, query.shape[-1]), self._weight(0), self._bias(0))
            k = F.linear(key.reshape(n * src_len, key.shape[-1]), self._weight(1), self._bias(1))
            v = F.linear(value.reshape(n * src_len, value.shape[-1]), self._weight(2), self._bias(2))
        return self._heads(q, n, length), self._heads(k, n, src_len), self._heads(v, n, src_len)

    def _heads(self, t: Tensor, n: int, length: int) -> Tensor:
        return _views.transpose(t.reshape(n, length, self.num_heads, self.head_dim), 1, 2)

    def _output(self, t: Tensor) -> Tensor:
        """[N, H, L, head_dim] -> out_proj of the merged heads, [N, L, E] (the GEMM over N * L rows)."""
        n, _, length, _ = t.shape
        merged = _views.transpose(t, 1, 2).reshape(n * length, self.embed_dim)
        out: Tensor = self.out_proj(merged)
        return out.reshape(n, length, self.embed_dim)

    # ---- forward ----------------------------------------------------------------------------------
    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (_views.unsqueeze(t, 0 if self.batch_first else 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = _views.unsqueeze(key_padding_mask, 0)
        if not self.batch_first:
            query, key, value = (_views.transpose(t, 0, 1) for t in (query, key, value))
        n, length, _ = query.shape
        src_len = key.shape[1]
        q, k, v = self._project(query, key, value)
        p = self.dropout if self.training else 0.0
        fused = None if need_weights else self._flash(q, k, v, attn_mask, key_padding_mask, is_causal, p)
        weights: Tensor | None = None
        if fused is None:
            bias = self._attention_bias(attn_mask, key_padding_mask, is_causal, n, length, src_len, q)
            fused, weights = attend(q, k, v, bias, p)
        out = self._output(fused)
        if not self.batch_first:
            out = _views.transpose(out, 0, 1)
        if unbatched:
            out = _views.squeeze(out, 0 if self.batch_first else 1)
        if not need_weights or weights is None:
            return out, None
        w = M.mean(weights, 1) if average_attn_weights else weights
        return out, (_views.squeeze(w, 0) if unbatched else w)

    def _flash(self, q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
               is_causal: bool, dropout_p: float) -> Tensor | None:
        """The fused flash_attention op (no weights wanted): the key-padding mask stays an [N, S] bias, never
        expanded to [N, L, S]; None when the kernel does not apply."""
        n, length, src_len = k.shape[0], q.shape[2], k.shape[2]
        bias = key_bias = None
        if attn_mask is not None:
            bias = mask_to_bias(attn_mask, q, true_means_masked=True)
            if bias.ndim == 3 and bias.shape[0] == n * self.num_heads:
                bias = bias.reshape(n, self.num_heads, length, src_len)
            elif bias.ndim != 2:
                return None  # the composite path raises the shape error
        if key_padding_mask is not None:
            if key_padding_mask.shape != (n, src_len):
                return None
            key_bias = mask_to_bias(key_padding_mask, q, true_means_masked=True)
        return flash_attend(q, k, v, bias, key_bias, is_causal and attn_mask is None, dropout_p)

    def _attention_bias(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool, n: int,
                        length: int, src_len: int, like: Tensor) -> Tensor | None:
        """One additive bias broadcastable to [N, H, L, S] from the masks (bool True = may NOT attend)."""
        bias: Tensor | None = None
        if attn_mask is not None:
            bias = mask_to_bias(attn_mask, like, true_means_masked=True)
            if bias.ndim == 3:  # [N * H, L, S]
                bias = bias.reshape(n, self.num_heads, length, src_len)
            elif bias.ndim != 2:
                raise ShapeError(f"MultiheadAttention: attn_mask must be 2-D or 3-D, got shape {attn_mask.shape}")
        elif is_causal:
            bias = causal_bias(length, src_len, 0, like.dtype, like.device)
        if key_padding_mask is not None:
            if key_padding_mask.shape != (n, src_len):
                raise ShapeError(f"MultiheadAttention: key_padding_mask of shape {key_padding_mask.shape}, "
                                 f"expected {(n, src_len)}")
            kpm = mask_to_bias(key_padding_mask, like, true_means_masked=True).reshape(n, 1, 1, src_len)
            bias = kpm if bias is None else M.add(bias, kpm)
        return bias

    def forward_cached(self, x: Tensor, cache: KVCache, start_pos: int = 0,
                       attn_mask: Tensor | None = None) -> Tensor:
        """Causal self-attention of new tokens x [N, T, E] (batch_first layout) at positions start_pos.. over
        the cache's earlier keys/values; the new keys/values are written into the cache."""
        n, length, _ = x.shape
        q, k, v = self._project(x, x, x)
        k_all, v_all = cache.update(k, v, start_pos)
        bias = causal_bias(length, start_pos + length, start_pos, q.dtype, q.device)
        if attn_mask is not None:
            bias = M.add(bias, mask_to_bias(attn_mask, q, true_means_masked=True))
        out = flash_attend(q, k_all, v_all, bias)
        if out is None:
            out, _ = attend(q, k_all, v_all, bias, 0.0)
        return self._output(out)

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        w = self.out_proj.weight
        return KVCache(batch_size, self.num_heads, max_len, self.head_dim, dtype=w.dtype, device=w.device)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
