"""PyTorch's encoder-decoder family: TransformerDecoderLayer, TransformerDecoder and nn.Transformer, with
PyTorch's submodule names (self_attn, multihead_attn, linear1/2, norm1..3, encoder.layers.0, ...) so a torch
state_dict loads unchanged. Built on the encoder pieces in transformer.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _creation
from .. import _math as M
from .._composites_torch import triu
from ..tensor import Tensor
from . import init
from .attention import MultiheadAttention
from .containers import ModuleList
from .dropout import Dropout
from .module import Module
from .normalization import LayerNorm
from .transformer import TransformerEncoder, TransformerEncoderLayer, _Layer

# rumus.nn star-imports these.
__all__ = ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


class TransformerDecoderLayer(_Layer):
    """Self-attention over the target, attention over the encoder's memory, feed-forward; post-norm by
    default, pre-norm with norm_first=True."""

    multihead_attn: MultiheadAttention
    norm3: LayerNorm
    dropout3: Dropout

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(locals(), cross_attention=True)  # the arguments above

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = M.add(x, self._sa(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = M.add(x, self._mha(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            return M.add(x, self._feed_forward(self.norm3(x), self.dropout3))
        x = self.norm1(M.add(x, self._sa(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal)))
        x = self.norm2(M.add(x, self._mha(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)))
        out: Tensor = self.norm3(M.add(x, self._feed_forward(x, self.dropout3)))
        return out

    def _sa(self, x: Tensor, mask: Tensor | None, padding: Tensor | None, causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                                is_causal=causal and mask is None)
        dropped: Tensor = self.dropout1(out)
        return dropped

    def _mha(self, x: Tensor, mem: Tensor, mask: Tensor | None, padding: Tensor | None, causal: bool) -> Tensor:
        out, _ = self.multihead_attn(x, mem, mem, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                                     is_causal=causal and mask is None)
        dropped: Tensor = self.dropout2(out)
        return dropped



class TransformerDecoder(Module):
    """`num_layers` copies of decoder_layer as layers.0, layers.1, ..., then the optional final norm."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([decoder_layer.clone() for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need" with PyTorch's signature and defaults."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        kw: dict[str, Any] = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                                  layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
                                  bias=bias, device=device, dtype=dtype)
        norm_kw = {"eps": layer_norm_eps, "bias": bias, "device": device, "dtype": dtype}
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers, LayerNorm(d_model, **norm_kw))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers, LayerNorm(d_model, **norm_kw))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():  # PyTorch's _reset_parameters
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        out: Tensor = self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                                   tgt_key_padding_mask=tgt_key_padding_mask,
                                   memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                                   memory_is_causal=memory_is_causal)
        return out

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A float mask with -inf above the diagonal: position i attends to positions <= i."""
        return triu(_creation.full((sz, sz), float("-inf"), dtype=dtype, device=device), 1)
