"""A small next-token language model trained from scratch in seconds, for quantization quality checks.

Data: token streams from a fixed random second-order Markov chain over 48 symbols (each context has a
few likely successors), so a trained model reaches a loss well below log(48) and quantization damage
shows up as a measurable loss increase. Model: embeddings of the last 4 tokens, concatenated, then
LayerNorm -> Linear(256, 256) -> GELU -> LayerNorm -> Linear(256, 256) -> GELU -> Linear(256, 48).
"""

from __future__ import annotations

import math

import numpy as np

import rumus as rm

VOCAB, CONTEXT, DIM, HIDDEN = 48, 4, 64, 256


def markov_tokens(n: int, seed: int) -> np.ndarray:
    table_rng = np.random.default_rng(1234)  # the same language for every split
    logits = table_rng.standard_normal((VOCAB, VOCAB, VOCAB)) * 3.0
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    cdf = probs.cumsum(-1)
    rng = np.random.default_rng(seed)
    out = np.zeros(n, np.int64)
    out[:2] = rng.integers(0, VOCAB, 2)
    u = rng.random(n)
    for i in range(2, n):
        out[i] = min(int(np.searchsorted(cdf[out[i - 2], out[i - 1]], u[i])), VOCAB - 1)
    return out


def windows(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(CONTEXT)[None, :] + np.arange(len(tokens) - CONTEXT)[:, None]
    return tokens[idx], tokens[CONTEXT:]


class TinyLM(rm.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = rm.nn.Embedding(VOCAB, DIM)
        self.body = rm.nn.Sequential(
            rm.nn.LayerNorm(CONTEXT * DIM), rm.nn.Linear(CONTEXT * DIM, HIDDEN), rm.nn.GELU(),
            rm.nn.LayerNorm(HIDDEN), rm.nn.Linear(HIDDEN, HIDDEN), rm.nn.GELU(),
            rm.nn.Linear(HIDDEN, VOCAB))

    def forward(self, ctx: rm.Tensor) -> rm.Tensor:
        e = self.embed(ctx)  # [B, CONTEXT, DIM]
        return self.body(e.reshape(ctx.shape[0], CONTEXT * DIM))


def train(steps: int = 200, batch: int = 128, seed: int = 0) -> tuple[TinyLM, dict[str, np.ndarray]]:
    rm.manual_seed(seed)
    data = {"train": windows(markov_tokens(20_000, 1)), "calib": windows(markov_tokens(2_000, 2)),
            "test": windows(markov_tokens(8_000, 3))}
    model = TinyLM()
    opt = rm.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    x, y = data["train"]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        pick = rng.integers(0, len(x), batch)
        loss = rm.nn.functional.cross_entropy(model(rm.tensor(x[pick])), rm.tensor(y[pick]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, {"calib_x": data["calib"][0], "test_x": data["test"][0], "test_y": data["test"][1]}


def loss_of(model: rm.nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with rm.no_grad():
        return float(rm.nn.functional.cross_entropy(model(rm.tensor(x)), rm.tensor(y)).item())


def clone(model: TinyLM) -> TinyLM:
    other = TinyLM()
    other.load_state_dict(model.state_dict())
    return other


def quality_table(model: TinyLM, data: dict[str, np.ndarray]) -> list[tuple[str, int | None, float, float]]:
    """(scheme/method, group size, held-out loss, perplexity) for float32, Q8 and INT4 RTN / GPTQ / AWQ."""
    calib = [rm.tensor(data["calib_x"][i:i + 512]) for i in range(0, 1024, 512)]
    rows: list[tuple[str, int | None, float, float]] = []
    base = loss_of(model, data["test_x"], data["test_y"])
    rows.append(("float32", None, base, math.exp(base)))
    q8m = rm.quant.quantize(clone(model), "q8", 32, "rtn")
    loss = loss_of(q8m, data["test_x"], data["test_y"])
    rows.append(("q8 rtn", 32, loss, math.exp(loss)))
    for g in (32, 128):
        for method in ("rtn", "gptq", "awq"):
            qm = rm.quant.quantize(clone(model), "int4", g, method, calib=calib)
            loss = loss_of(qm, data["test_x"], data["test_y"])
            rows.append((f"int4 {method}", g, loss, math.exp(loss)))
    return rows
