"""The /v1/embeddings encoder: BERT's architecture under Hugging Face's BertModel names (checked against BERT's
math written out in torch), a checkpoint loader that accepts HF files, SimCSE training that makes near-duplicate
texts closer than unrelated ones, and the server using it when the checkpoint has one."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus.serve.encoder import (ENCODER_DIR, BertConfig, BertEncoder, load_bert_state, load_encoder, save_encoder,
                                 train_simcse)
from rumus.serve.tokenizer import encode
from rumus_contracts import FormatError

torch = pytest.importorskip("torch")
CFG = BertConfig(vocab_size=256, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
                 max_position_embeddings=40, hidden_dropout_prob=0.0)


def test_parameter_names_are_hugging_face_bert() -> None:
    keys = set(BertEncoder(CFG).state_dict())
    layer = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
             "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"]
    norm = {"LayerNorm"}
    want = {f"embeddings.{n}.weight" for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")}
    want |= {"embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"}
    for i in range(CFG.num_hidden_layers):
        for n in layer:
            want |= {f"encoder.layer.{i}.{n}.weight", f"encoder.layer.{i}.{n}.bias"}
    assert keys == want, (keys - want, want - keys, norm)


def _torch_bert(state: dict[str, Any], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """BERT (post-norm, erf GELU, padding keys masked) + mean pooling + L2 norm, from the state dict alone."""
    s = {k: torch.tensor(np.asarray(v.numpy(), np.float64)) for k, v in state.items()}
    ln = torch.nn.functional.layer_norm
    b, n = ids.shape
    h = CFG.hidden_size
    x = s["embeddings.word_embeddings.weight"][torch.tensor(ids)] + s["embeddings.position_embeddings.weight"][:n] \
        + s["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, (h,), s["embeddings.LayerNorm.weight"], s["embeddings.LayerNorm.bias"], CFG.layer_norm_eps)
    m = torch.tensor(mask)
    bias = torch.where(m, 0.0, -math.inf).double()[:, None, None, :]
    heads, d = CFG.num_attention_heads, h // CFG.num_attention_heads

    def lin(t: Any, name: str) -> Any:
        return t @ s[f"{name}.weight"].T + s[f"{name}.bias"]
    for i in range(CFG.num_hidden_layers):
        p = f"encoder.layer.{i}."

        def split(t: Any) -> Any:
            return t.reshape(b, n, heads, d).transpose(1, 2)
        q, k, v = (split(lin(x, p + f"attention.self.{w}")) for w in ("query", "key", "value"))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + bias, -1) @ v
        att = lin(att.transpose(1, 2).reshape(b, n, h), p + "attention.output.dense")
        x = ln(att + x, (h,), s[p + "attention.output.LayerNorm.weight"], s[p + "attention.output.LayerNorm.bias"],
               CFG.layer_norm_eps)
        mid = torch.nn.functional.gelu(lin(x, p + "intermediate.dense"))
        x = ln(lin(mid, p + "output.dense") + x, (h,), s[p + "output.LayerNorm.weight"], s[p + "output.LayerNorm.bias"],
               CFG.layer_norm_eps)
    w = m.double()[:, :, None]
    pooled = (x * w).sum(1) / w.sum(1)
    return (pooled / pooled.norm(dim=-1, keepdim=True)).numpy()


def test_matches_bert_math_with_padding() -> None:
    rm.manual_seed(1)
    model = BertEncoder(CFG).eval()
    texts = [encode("padded batch"), encode("a longer text than the first one"), encode("x")]
    got = model.embed(texts)
    n = max(map(len, texts))
    ids = np.zeros((3, n), np.int64)
    mask = np.zeros((3, n), bool)
    for i, t in enumerate(texts):
        ids[i, :len(t)], mask[i, :len(t)] = t, True
    np.testing.assert_allclose(got, _torch_bert(model.state_dict(), ids, mask), rtol=1e-5, atol=1e-5)
    # padding does not change a text's embedding
    np.testing.assert_allclose(model.embed([texts[2]])[0], got[2], rtol=1e-5, atol=1e-5)


def test_loads_hugging_face_files_and_refuses_others(tmp_path: Any) -> None:
    rm.manual_seed(2)
    model = BertEncoder(CFG).eval()
    hf = {f"bert.{k}": v for k, v in model.state_dict().items()}
    hf["bert.pooler.dense.weight"] = rm.zeros(16, 16)
    hf["bert.embeddings.position_ids"] = rm.arange(40)
    other = BertEncoder(CFG)
    load_bert_state(other, hf)
    other.eval()
    texts = [encode("same numbers")]
    np.testing.assert_array_equal(other.embed(texts), model.embed(texts))
    del hf["bert.encoder.layer.1.output.dense.weight"]
    with pytest.raises(FormatError, match="missing"):
        load_bert_state(BertEncoder(CFG), hf)
    save_encoder(model, tmp_path / "enc")
    np.testing.assert_array_equal(load_encoder(tmp_path / "enc").embed(texts), model.embed(texts))
    os.remove(tmp_path / "enc" / "config.json")
    with pytest.raises(FormatError, match="config.json"):
        load_encoder(tmp_path / "enc")


@pytest.mark.slow
def test_simcse_training_makes_near_duplicates_closest() -> None:
    from rumus.serve.demo_lm import corpus
    cfg = BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=48)
    model = train_simcse(corpus(100_000), cfg, steps=60, batch=16, length=32, log_every=0)
    pairs = [("Beautiful is better than ugly.", "Beautiful is better than ugly!"),
             ("def wrap(text, width=70):", "def fill(text, width=70):"),
             ("Readability counts.", "Readability counts"),
             ("import heapq", "import bisect"),
             ("Errors should never pass silently.", "Errors should never pass silently!")]
    emb = model.embed([encode(t) for pair in pairs for t in pair])
    sims = emb @ emb.T
    for i in range(len(pairs)):
        partner = sims[2 * i, 2 * i + 1]
        others = [sims[2 * i, 2 * j] for j in range(len(pairs)) if j != i]
        assert partner > max(others), (pairs[i], partner, others)


pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def test_server_embeds_with_the_checkpoint_encoder(tmp_path: Any) -> None:
    from serve_client import ServerProcess, tiny_checkpoint
    tiny_checkpoint(str(tmp_path))
    rm.manual_seed(4)
    encoder = BertEncoder(CFG).eval()
    save_encoder(encoder, tmp_path / ENCODER_DIR)
    s = ServerProcess(str(tmp_path), log=str(tmp_path / "server.log"))
    try:
        status, _, health = s.request("GET", "/health")
        assert status == 200 and health["embedder"] == "bert-encoder"
        texts = ["one text", "another, longer text"]
        status, _, body = s.request("POST", "/v1/embeddings", {"input": texts})
        assert status == 200
        got = np.array([d["embedding"] for d in body["data"]])
        np.testing.assert_allclose(got, encoder.embed([encode(t) for t in texts]), rtol=1e-5, atol=1e-6)
        status, _, body = s.request("POST", "/v1/embeddings", {"input": "y" * 41})
        assert status == 400 and "limit is 40 tokens" in body["error"]
    finally:
        s.stop()
