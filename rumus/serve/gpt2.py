"""A decoder-only language model with GPT-2's architecture and Hugging Face's GPT-2 parameter names.

Parameter names and layouts are those of `transformers.GPT2LMHeadModel`, so a GPT-2-format safetensors file
loads as it is: `transformer.wte/wpe`, `transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
mlp.c_proj}`, `transformer.ln_f`; the attention and MLP projections are GPT-2's `Conv1D`, whose weight is
stored [in, out] (the transpose of nn.Linear); `lm_head` is tied to `wte`. The files Hugging Face publishes
for GPT-2 leave out the `transformer.` prefix and carry `attn.bias` mask buffers; `load_gpt2_state` accepts
both forms.

Attention in every path (training, prefill, batched decode over the paged KV cache) is the same composite
`attend` with an additive bias, so the cached and uncached paths compute the same numbers.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus.nn._functional_attention import attend, causal_bias
from rumus_contracts import FormatError

from ..tensor import Tensor
from .checkpoint_dir import check_config, load_model_dir, read_config_fields, write_model_dir


@dataclass(frozen=True)
class GPT2Config:
    """Hugging Face's GPT2Config field names (n_positions = longest sequence the model can see)."""
    vocab_size: int = 256
    n_positions: int = 128
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        check_config(self, ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"), "n_embd", "n_head")

    @staticmethod
    def from_json(path: str | os.PathLike[str]) -> GPT2Config:
        return GPT2Config(**read_config_fields(path, asdict(GPT2Config()), "a GPT-2 config"))

    def to_json(self) -> str:
        return json.dumps({"model_type": "gpt2", **asdict(self)}, indent=1)


class Conv1D(nn.Module):
    """GPT-2's projection: y = x @ weight + bias with weight stored [in, out]."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(rm.randn(n_in, n_out) * 0.02)
        self.bias = nn.Parameter(rm.zeros(n_out))

    def forward(self, x: Tensor) -> Tensor:
        return rm.add(rm.matmul(x, self.weight), self.bias)


class Attention(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.c_attn = Conv1D(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd)

    def heads(self, t: Tensor) -> Tensor:
        """[B, T, C] -> [B, H, T, D]."""
        b, n = t.shape[0], t.shape[1]
        return t.reshape(b, n, self.n_head, self.n_embd // self.n_head).permute((0, 2, 1, 3))

    def q_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Queries [B, T, C] and keys + values side by side [B, T, 2C] (c_attn's own layout)."""
        qkv = self.c_attn(x)
        return qkv[..., : self.n_embd], qkv[..., self.n_embd:]

    def mix(self, q: Tensor, k: Tensor, v: Tensor, bias: Tensor) -> Tensor:
        """q [B, T, C], k/v [B, S, C], bias broadcastable to [B, H, T, S] -> [B, T, C] after c_proj."""
        out, _ = attend(self.heads(q), self.heads(k), self.heads(v), bias)
        b, n = q.shape[0], q.shape[1]
        y: Tensor = self.c_proj(out.permute((0, 2, 1, 3)).reshape(b, n, self.n_embd))
        return y


class MLP(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = Conv1D(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        y: Tensor = self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))  # GPT-2's "gelu_new"
        return y


class Block(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)


class Transformer(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        with rm.no_grad():  # GPT-2's initialisation: N(0, 0.02) embeddings
            self.wte.weight.copy_(rm.randn(cfg.vocab_size, cfg.n_embd) * 0.02)
            self.wpe.weight.copy_(rm.randn(cfg.n_positions, cfg.n_embd) * 0.01)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)


KVCache = Any  # callable(layer, kv [B, T, 2C]) -> (K [B, S, C], V [B, S, C]); see engine.py


class GPT2LMHeadModel(nn.Module):
    """`forward(ids)` -> logits [B, T, vocab]; `hidden(...)` is the cache-aware path the engine uses."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.config = cfg
        self.transformer = Transformer(cfg)

    def forward(self, ids: Tensor) -> Tensor:
        n = ids.shape[1]
        bias = causal_bias(n, n, 0, self.transformer.wte.weight.dtype, ids.device)
        return self.logits(self.hidden(ids, np.arange(n), bias, None))

    def hidden(self, ids: Tensor, positions: np.ndarray, bias: Tensor, cache: KVCache | None) -> Tensor:
        """ln_f(h) for ids [B, T] at absolute positions [T] or [B, T]. Without a cache, queries attend to this
        call's own keys; with one, cache(layer, kv) stores the new keys/values and returns those to attend."""
        if int(np.max(positions, initial=0)) >= self.config.n_positions:
            raise FormatError(f"sequence longer than the model's n_positions={self.config.n_positions}")
        t = self.transformer
        pos = rm.tensor(np.asarray(positions, dtype=np.int64), device=ids.device)
        x = rm.add(t.wte(ids), t.wpe(pos))
        for i, block in enumerate(t.h):
            q, kv = block.attn.q_kv(block.ln_1(x))
            k, v = cache(i, kv) if cache is not None else (kv[..., : self.config.n_embd], kv[..., self.config.n_embd:])
            x = rm.add(x, block.attn.mix(q, k, v, bias))
            x = rm.add(x, block.mlp(block.ln_2(x)))
        out: Tensor = t.ln_f(x)
        return out

    def logits(self, h: Tensor) -> Tensor:
        return rm.matmul(h, self.transformer.wte.weight.T)  # lm_head tied to wte, as in GPT-2


_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")  # HF's causal-mask buffers, not parameters


def normalize_gpt2_names(state: Mapping[str, Any]) -> dict[str, Any]:
    """Hugging Face's two spellings (with or without `transformer.`) -> ours; drop mask buffers and the tied
    lm_head (it must equal wte when both are present)."""
    out: dict[str, Any] = {}
    for name, value in state.items():
        if name.endswith(_IGNORED_SUFFIXES) or name == "lm_head.weight":
            continue
        out[name if name.startswith("transformer.") else "transformer." + name] = value
    return out


def load_gpt2_state(model: GPT2LMHeadModel, state: Mapping[str, Tensor]) -> None:
    """Load a GPT-2-format state dict strictly: every parameter present, of the right shape, nothing extra."""
    ours = normalize_gpt2_names(state)
    if "lm_head.weight" in state and "transformer.wte.weight" in ours:
        a, b = state["lm_head.weight"].numpy(), ours["transformer.wte.weight"].numpy()
        if a.shape != b.shape or not np.array_equal(a, b):
            raise FormatError("lm_head.weight differs from wte.weight: this model ties them (GPT-2's layout)")
    expected = dict(model.state_dict())
    missing = sorted(set(expected) - set(ours))
    extra = sorted(set(ours) - set(expected))
    if missing or extra:
        raise FormatError(f"not a GPT-2 state dict for this config: missing {missing[:5]}, unexpected {extra[:5]}")
    for name, value in ours.items():
        if tuple(value.shape) != tuple(expected[name].shape):
            raise FormatError(f"{name}: shape {tuple(value.shape)} in the file, {tuple(expected[name].shape)} "
                              f"in the config (GPT-2's Conv1D weights are stored [in, out])")
    model.load_state_dict(ours)


def save_checkpoint(model: GPT2LMHeadModel, directory: str | os.PathLike[str]) -> None:
    """`model.safetensors` (Hugging Face GPT-2 names) + `config.json`, as a GPT-2 repository holds them."""
    write_model_dir(directory, model.state_dict(), model.config.to_json())


def load_checkpoint(directory: str | os.PathLike[str], device: Any = None) -> GPT2LMHeadModel:
    """A directory holding config.json + model.safetensors (ours or a Hugging Face GPT-2 download)."""
    return load_model_dir(directory, "a checkpoint", lambda path: GPT2LMHeadModel(GPT2Config.from_json(path)),
                          load_gpt2_state, device)


def init_scale_residuals(model: GPT2LMHeadModel) -> None:
    """GPT-2's scaled init of the residual projections (std 0.02 / sqrt(2 * n_layer))."""
    std = 0.02 / math.sqrt(2 * model.config.n_layer)
    with rm.no_grad():
        for block in model.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                proj.weight.copy_(rm.randn(*proj.weight.shape) * std)
