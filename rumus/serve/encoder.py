"""A text encoder for /v1/embeddings: BERT's architecture with Hugging Face's `BertModel` parameter names,
mean-pooled and L2-normalised the way sentence-transformers pools (padding excluded).

Names: `embeddings.{word_embeddings, position_embeddings, token_type_embeddings, LayerNorm}`,
`encoder.layer.N.attention.self.{query, key, value}`, `encoder.layer.N.attention.output.{dense, LayerNorm}`,
`encoder.layer.N.intermediate.dense`, `encoder.layer.N.output.{dense, LayerNorm}` — post-norm blocks, erf
GELU, bidirectional attention — so a BERT-format safetensors file of the same shape loads as it is (with or
without the `bert.` prefix; a pooler, if present, is ignored: mean pooling does not use it).

`train_simcse` trains one from scratch on any byte corpus with unsupervised SimCSE (each text encoded twice
under dropout is its own positive, the rest of the batch are negatives), which is what `rumus demo lm` does
so a checkpoint with a real encoder exists on any machine.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus.nn._functional_attention import attend
from rumus_contracts import FormatError

from ..tensor import Tensor
from .checkpoint_dir import check_config, load_model_dir, read_config_fields, write_model_dir

ENCODER_DIR = "encoder"  # a checkpoint's encoder lives in this sub-directory


@dataclass(frozen=True)
class BertConfig:
    """Hugging Face's BertConfig field names."""
    vocab_size: int = 256
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 256
    max_position_embeddings: int = 128
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1

    def __post_init__(self) -> None:
        positive = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                    "max_position_embeddings", "type_vocab_size")
        check_config(self, positive, "hidden_size", "num_attention_heads")

    @staticmethod
    def from_json(path: str | os.PathLike[str]) -> BertConfig:
        return BertConfig(**read_config_fields(path, asdict(BertConfig()), "a BERT config"))


class _Dense(nn.Module):
    """`dense` + optional post-norm, as BERT's *Output modules hold them."""

    def __init__(self, n_in: int, n_out: int, eps: float | None) -> None:
        super().__init__()
        self.dense = nn.Linear(n_in, n_out)
        if eps is not None:
            self.LayerNorm = nn.LayerNorm(n_out, eps=eps)


class _SelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)


class _Attention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.self = _SelfAttention(cfg)  # Hugging Face's name
        self.output = _Dense(cfg.hidden_size, cfg.hidden_size, cfg.layer_norm_eps)


class _Layer(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.attention = _Attention(cfg)
        self.intermediate = _Dense(cfg.hidden_size, cfg.intermediate_size, None)
        self.output = _Dense(cfg.intermediate_size, cfg.hidden_size, cfg.layer_norm_eps)

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        cfg, sa = self.cfg, self.attention.self
        b, n, h = x.shape[0], x.shape[1], cfg.num_attention_heads

        def heads(t: Tensor) -> Tensor:
            return t.reshape(b, n, h, cfg.hidden_size // h).permute((0, 2, 1, 3))
        ctx, _ = attend(heads(sa.query(x)), heads(sa.key(x)), heads(sa.value(x)), bias)
        ctx = ctx.permute((0, 2, 1, 3)).reshape(b, n, cfg.hidden_size)
        p = cfg.hidden_dropout_prob if self.training else 0.0
        out = self.attention.output
        x = out.LayerNorm(rm.add(F.dropout(out.dense(ctx), p, self.training), x))
        mid = F.gelu(self.intermediate.dense(x))
        y: Tensor = self.output.LayerNorm(rm.add(F.dropout(self.output.dense(mid), p, self.training), x))
        return y


class _Embeddings(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)


class _Encoder(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList([_Layer(cfg) for _ in range(cfg.num_hidden_layers)])


class BertEncoder(nn.Module):
    """`forward(ids [B, T] int64, mask [B, T] bool or None)` -> embeddings [B, hidden], unit length."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = _Embeddings(cfg)
        self.encoder = _Encoder(cfg)

    def hidden(self, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        cfg = self.config
        b, n = ids.shape[0], ids.shape[1]
        if n > cfg.max_position_embeddings:
            raise FormatError(f"the encoder sees at most {cfg.max_position_embeddings} tokens, got {n}")
        emb = self.embeddings
        pos = rm.arange(n, dtype=rm.int64, device=ids.device)
        types = rm.zeros(b, n, dtype=rm.int64, device=ids.device)
        x = rm.add(rm.add(emb.word_embeddings(ids), emb.position_embeddings(pos)), emb.token_type_embeddings(types))
        x = F.dropout(emb.LayerNorm(x), cfg.hidden_dropout_prob if self.training else 0.0, self.training)
        keep = mask if mask is not None else rm.ones(b, n, dtype=rm.bool, device=ids.device)
        # padding keys get -inf: [B, 1, 1, T]
        bias = rm.where(keep, 0.0, float("-inf")).reshape(b, 1, 1, n).to(x.dtype)
        for layer in self.encoder.layer:
            x = layer(x, bias)
        return x

    def forward(self, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        h = self.hidden(ids, mask)
        b, n = ids.shape[0], ids.shape[1]
        w = (mask if mask is not None else rm.ones(b, n, dtype=rm.bool, device=ids.device)).to(h.dtype)
        pooled = rm.div(rm.sum(rm.mul(h, w.reshape(b, n, 1)), 1), rm.sum(w, 1, keepdim=True))
        return F.normalize(pooled, dim=-1)

    def embed(self, texts_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit embeddings [len(texts), hidden] of byte-token lists (padded into one batch)."""
        n = max(len(t) for t in texts_ids)
        ids = np.zeros((len(texts_ids), n), np.int64)
        mask = np.zeros((len(texts_ids), n), bool)
        for i, t in enumerate(texts_ids):
            ids[i, :len(t)], mask[i, :len(t)] = t, True
        dev = self.embeddings.word_embeddings.weight.device
        with rm.no_grad():
            out: np.ndarray = self(rm.tensor(ids, device=dev), rm.tensor(mask, device=dev)).numpy()
        return out


def load_bert_state(model: BertEncoder, state: Mapping[str, Any]) -> None:
    """Our names, or a Hugging Face BertModel's (`bert.` prefix, pooler.* and position_ids buffers allowed)."""
    own = set(model.state_dict())
    picked: dict[str, Any] = {}
    for key, value in state.items():
        k = key[len("bert."):] if key.startswith("bert.") else key
        if k.startswith("pooler.") or k.endswith("position_ids") or k.startswith("cls."):
            continue
        picked[k] = value
    missing, extra = own - set(picked), set(picked) - own
    if missing or extra:
        raise FormatError(f"not a BERT encoder state of this shape: missing {sorted(missing)[:4]}, unexpected "
                          f"{sorted(extra)[:4]}")
    model.load_state_dict(picked)


def save_encoder(model: BertEncoder, directory: str | os.PathLike[str]) -> None:
    write_model_dir(directory, model.state_dict(), json.dumps({"model_type": "bert", **asdict(model.config)}, indent=1))


def load_encoder(directory: str | os.PathLike[str], device: Any = None) -> BertEncoder:
    return load_model_dir(directory, "an encoder", lambda path: BertEncoder(BertConfig.from_json(path)),
                          load_bert_state, device)


def _span_dropout(window: np.ndarray, rng: np.random.Generator, p: float = 0.1) -> np.ndarray:
    """A view of the text with ~p of its bytes replaced by spaces (a second, cheap augmentation next to dropout)."""
    out = window.copy()
    out[rng.random(out.shape) < p] = 32
    return out


def train_simcse(data: np.ndarray, cfg: BertConfig, steps: int, batch: int = 32, length: int = 48,
                 lr: float = 1e-3, temperature: float = 0.05, seed: int = 0, log_every: int = 50) -> BertEncoder:
    """Unsupervised SimCSE on byte windows of `data` (an int64 byte array)."""
    rm.manual_seed(seed)
    model = BertEncoder(cfg)
    opt = rm.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    target = rm.arange(batch, dtype=rm.int64)
    start = time.perf_counter()
    model.train()
    for step in range(steps):
        at = rng.integers(0, data.size - length, batch)
        window = np.stack([data[i:i + length] for i in at])
        z1 = model(rm.tensor(_span_dropout(window, rng)))
        z2 = model(rm.tensor(_span_dropout(window, rng)))
        loss = F.cross_entropy(rm.div(rm.matmul(z1, z2.T), temperature), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"encoder step {step:5d}  loss {float(loss.item()):.3f}  ({time.perf_counter() - start:.0f} s)",
                  flush=True)
    model.eval()
    return model
