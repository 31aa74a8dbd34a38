"""The architectures of `_transformers.py` in plain torch (as HuggingFace's BERT / GPT-2 write them: sizes
from the input, positions from arange, GPT-2's causal mask from the length), exported by torch's two
exporters."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn as tnn
import torch.nn.functional as tF

VOCAB, HIDDEN, HEADS, FFN, MAX_POS = 37, 32, 4, 48, 64


class SelfAttention(tnn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.qkv = tnn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = tnn.Linear(HIDDEN, HIDDEN)
        self.causal = causal

    def forward(self, x: Any, pad_bias: Any = None) -> Any:
        B, S, C = x.shape
        D = C // HEADS
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, S, HEADS, D).transpose(1, 2)
        k = k.view(B, S, HEADS, D).transpose(1, 2)
        v = v.view(B, S, HEADS, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        if self.causal:
            keep = torch.tril(torch.ones(S, S)).view(1, 1, S, S)
            att = att.masked_fill(keep == 0, float("-inf"))
        if pad_bias is not None:
            att = att + pad_bias
        y = tF.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, S, C))


class Block(tnn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attn = SelfAttention(causal)
        self.ln1, self.ln2 = tnn.LayerNorm(HIDDEN), tnn.LayerNorm(HIDDEN)
        self.fc, self.out = tnn.Linear(HIDDEN, FFN), tnn.Linear(FFN, HIDDEN)
        self.pre_norm = causal

    def forward(self, x: Any, pad_bias: Any = None) -> Any:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), pad_bias)
            return x + self.out(tF.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        x = self.ln1(x + self.attn(x, pad_bias))
        return self.ln2(x + self.out(tF.gelu(self.fc(x))))


class Bert(tnn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.tok = tnn.Embedding(VOCAB, HIDDEN)
        self.pos = tnn.Embedding(MAX_POS, HIDDEN)
        self.typ = tnn.Embedding(2, HIDDEN)
        self.ln = tnn.LayerNorm(HIDDEN)
        self.blocks = tnn.ModuleList([Block(causal=False) for _ in range(layers)])

    def forward(self, ids: Any, mask: Any) -> Any:
        B, S = ids.shape
        positions = torch.arange(S).unsqueeze(0).expand(B, S)
        types = torch.zeros(B, S, dtype=torch.long)
        x = self.ln(self.tok(ids) + self.pos(positions) + self.typ(types))
        pad_bias = (1.0 - mask.view(B, 1, 1, S).float()) * -10000.0
        for blk in self.blocks:
            x = blk(x, pad_bias)
        return x


class Gpt2(tnn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.wte, self.wpe = tnn.Embedding(VOCAB, HIDDEN), tnn.Embedding(MAX_POS, HIDDEN)
        self.blocks = tnn.ModuleList([Block(causal=True) for _ in range(layers)])
        self.ln_f = tnn.LayerNorm(HIDDEN)

    def forward(self, ids: Any) -> Any:
        B, S = ids.size()
        pos = torch.arange(0, S, dtype=torch.long)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()


def export(model: tnn.Module, args: tuple[Any, ...], names: list[str], path: Path, dynamo: bool,
           opset: int = 18) -> None:
    """Export with dynamic batch and sequence on every input (dim 0 and 1)."""
    model.eval()
    if dynamo:
        batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=1, max=MAX_POS)
        shapes = {n: {0: batch, 1: seq} for n in names}
        torch.onnx.export(model, args, str(path), input_names=names, output_names=["y"], dynamo=True,
                          dynamic_shapes=shapes, opset_version=opset)
    else:
        axes = {n: {0: "batch", 1: "seq"} for n in names}
        torch.onnx.export(model, args, str(path), input_names=names, output_names=["y"], dynamo=False,
                          dynamic_axes=axes, opset_version=opset)
