"""BERT- and GPT-2-style encoders written the way their reference implementations are: sizes read from the
input (`B, S = ids.shape`), positions from `arange(S)`, heads split by `view(B, S, H, D)`, GPT-2's causal
mask built from the length. The same architectures in plain torch are in `_torch_transformers.py`."""

from __future__ import annotations

import math
from typing import Any

import rumus as rm
import rumus.nn as nn
import rumus.nn.functional as F

VOCAB, HIDDEN, HEADS, FFN, MAX_POS = 37, 32, 4, 48, 64


class SelfAttention(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.causal = causal

    def forward(self, x: Any, pad_bias: Any = None) -> Any:
        B, S, C = x.shape
        D = C // HEADS
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, S, HEADS, D).transpose(1, 2)
        k = k.view(B, S, HEADS, D).transpose(1, 2)
        v = v.view(B, S, HEADS, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        if self.causal:  # GPT-2: the lower triangle of an S x S matrix of ones
            keep = rm.tril(rm.ones(S, S, device=x.device)).view(1, 1, S, S)
            att = att.masked_fill(keep == 0, float("-inf"))
        if pad_bias is not None:
            att = att + pad_bias
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, S, C))


class Block(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attn = SelfAttention(causal)
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.fc, self.out = nn.Linear(HIDDEN, FFN), nn.Linear(FFN, HIDDEN)
        self.pre_norm = causal  # GPT-2 normalizes before each sublayer, BERT after

    def forward(self, x: Any, pad_bias: Any = None) -> Any:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), pad_bias)
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        x = self.ln1(x + self.attn(x, pad_bias))
        return self.ln2(x + self.out(F.gelu(self.fc(x))))


class Bert(nn.Module):
    """ids [B, S] and an attention mask [B, S] (1 = token, 0 = padding) -> hidden states [B, S, HIDDEN]."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(MAX_POS, HIDDEN)
        self.typ = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN)
        self.blocks = nn.ModuleList([Block(causal=False) for _ in range(layers)])

    def forward(self, ids: Any, mask: Any) -> Any:
        B, S = ids.shape
        positions = rm.arange(S, device=ids.device).unsqueeze(0).expand(B, S)
        types = rm.zeros(B, S, dtype="int64", device=ids.device)
        x = self.ln(self.tok(ids) + self.pos(positions) + self.typ(types))
        pad_bias = (1.0 - mask.view(B, 1, 1, S).to("float32")) * -10000.0
        for blk in self.blocks:
            x = blk(x, pad_bias)
        return x


class Gpt2(nn.Module):
    """ids [B, S] -> logits [B, S, VOCAB] (the head tied to the token embedding)."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(MAX_POS, HIDDEN)
        self.blocks = nn.ModuleList([Block(causal=True) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, ids: Any) -> Any:
        B, S = ids.size()
        pos = rm.arange(0, S, dtype="int64", device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()
