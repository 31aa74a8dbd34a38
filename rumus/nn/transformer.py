"""Transformer layers: PyTorch's TransformerEncoderLayer / TransformerEncoder (same submodule names, so
PyTorch state_dicts load unchanged) and a pre-norm decoder TransformerBlock with a KV-cache forward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self, cast

from rumus_contracts import RumusError

from .. import _math as M
from ..tensor import Tensor
from . import functional as F
from .activation import GELU
from .attention import KVCache, MultiheadAttention
from .containers import ModuleList, Sequential
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

# rumus.nn star-imports these.
__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerBlock"]


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RumusError(f"activation should be 'relu' or 'gelu' (or a callable), not {activation!r}")


class _Layer(Module):
    """What the encoder and decoder layers share: their constructor's arguments (PyTorch's, the same for
    both; kept for `clone`), their submodules built in PyTorch's order (so parameters() lines up with
    torch's): self_attn, the decoder's multihead_attn, linear1, dropout, linear2, norm1..n, dropout1..n
    (n = 2 for the encoder, 3 for the decoder), and the feed-forward block (linear1, activation, dropout,
    linear2, then the layer's own output dropout)."""

    norm1: LayerNorm
    norm2: LayerNorm
    dropout1: Dropout
    dropout2: Dropout

    def __init__(self, config: dict[str, Any], cross_attention: bool) -> None:
        super().__init__()
        self._config = {k: v for k, v in config.items() if k != "self" and not k.startswith("__")}
        c = self._config
        kw = {"device": c["device"], "dtype": c["dtype"]}
        d, p, bias = c["d_model"], c["dropout"], c["bias"]
        self.self_attn = MultiheadAttention(d, c["nhead"], dropout=p, bias=bias, batch_first=c["batch_first"], **kw)
        if cross_attention:
            self.multihead_attn = MultiheadAttention(d, c["nhead"], dropout=p, bias=bias,
                                                     batch_first=c["batch_first"], **kw)
        self.linear1 = Linear(d, c["dim_feedforward"], bias=bias, **kw)
        self.dropout = Dropout(p)
        self.linear2 = Linear(c["dim_feedforward"], d, bias=bias, **kw)
        self.norm_first: bool = c["norm_first"]
        n = 3 if cross_attention else 2
        for i in range(1, n + 1):
            setattr(self, f"norm{i}", LayerNorm(d, eps=c["layer_norm_eps"], bias=bias, **kw))
        for i in range(1, n + 1):
            setattr(self, f"dropout{i}", Dropout(p))
        self.activation = _activation(c["activation"])

    def _feed_forward(self, x: Tensor, out_dropout: Dropout) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])  # 2-D GEMMs over every position at once
        out: Tensor = out_dropout(self.linear2(self.dropout(self.activation(self.linear1(flat)))))
        return out.reshape(x.shape)

    def clone(self) -> Self:
        """A new layer with the same configuration and a copy of the parameters (PyTorch deep-copies)."""
        twin = cast(Callable[..., Self], type(self))(**self._config)
        twin.load_state_dict(self.state_dict())
        twin.train(self.training)
        return twin


class TransformerEncoderLayer(_Layer):
    """PyTorch's nn.TransformerEncoderLayer: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
    dropout2; post-norm by default, pre-norm with norm_first=True."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(locals(), cross_attention=False)  # the arguments above

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = M.add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal))
            return M.add(x, self._feed_forward(self.norm2(x), self.dropout2))
        x = self.norm1(M.add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal)))
        out: Tensor = self.norm2(M.add(x, self._feed_forward(x, self.dropout2)))
        return out

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)
        dropped: Tensor = self.dropout1(out)
        return dropped



class TransformerEncoder(Module):
    """PyTorch's nn.TransformerEncoder: `num_layers` copies of encoder_layer as layers.0, layers.1, ..."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([encoder_layer.clone() for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerBlock(Module):
    """A pre-norm decoder block (GPT-2 style), batch_first:

        x = x + dropout(attn(ln1(x)))      causal self-attention
        x = x + dropout(mlp(ln2(x)))       mlp = Linear(d, d_ff) -> GELU -> Linear(d_ff, d)

    forward(x) trains on whole sequences; forward(x, kv_cache=cache, start_pos=p) runs new tokens at
    positions p.. against the cached keys/values and returns (x, cache) (see `new_cache`)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None, dropout: float = 0.0,
                 activation: str = "gelu", layer_norm_eps: float = 1e-5, bias: bool = True, causal: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.causal = causal
        self.ln1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.attn = MultiheadAttention(d_model, n_heads, dropout=dropout, bias=bias, batch_first=True, **kw)
        self.ln2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        act: Module = GELU() if activation == "gelu" else GELU("tanh") if activation == "gelu_tanh" else \
            _Lambda(_activation(activation))
        self.mlp = Sequential(Linear(d_model, d_ff, bias=bias, **kw), act, Linear(d_ff, d_model, bias=bias, **kw))
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, kv_cache: KVCache | None = None,
                start_pos: int = 0) -> Any:
        h = self.ln1(x)
        if kv_cache is not None:
            a = self.attn.forward_cached(h, kv_cache, start_pos, attn_mask)
        else:
            a, _ = self.attn(h, h, h, attn_mask=attn_mask, need_weights=False,
                             is_causal=self.causal and attn_mask is None)
        x = M.add(x, self.dropout(a))
        h = self.ln2(x)
        x = M.add(x, self.dropout(self.mlp(h.reshape(-1, h.shape[-1])).reshape(h.shape)))
        return (x, kv_cache) if kv_cache is not None else x

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        return self.attn.new_cache(batch_size, max_len)


class _Lambda(Module):
    def __init__(self, fn: Callable[[Tensor], Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x)
