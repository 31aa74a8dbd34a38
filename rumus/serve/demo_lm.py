"""`rumus demo lm`: train a small byte-level GPT-2 on text that ships with Python itself (the Zen of Python
and standard-library sources), offline, and save a checkpoint `rumus serve` can load.

    rumus demo lm [--out DIR] [--steps N] [--n-layer L] [--n-embd C] [--n-head H] [--context T]
"""

from __future__ import annotations

import argparse
import codecs
import inspect
import math
import os
import sys
import time

import numpy as np

import rumus as rm
from rumus.nn import functional as F
from rumus.optim import AdamW

from .gpt2 import GPT2Config, GPT2LMHeadModel, init_scale_residuals, save_checkpoint
from .tokenizer import VOCAB_SIZE, decode, encode

_STDLIB_MODULES = ("textwrap", "string", "fnmatch", "shlex", "glob", "bisect", "heapq", "colorsys")


def corpus(max_bytes: int = 400_000) -> np.ndarray:
    """The Zen of Python (the `this` module holds it rot13-encoded) followed by a few stdlib modules' source."""
    import contextlib
    import importlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        this = importlib.import_module("this")
    parts = [codecs.decode(this.s, "rot13")]
    for name in _STDLIB_MODULES:
        try:
            parts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, TypeError):  # a Python built without its .py sources: the Zen alone still works
            continue
    data = np.frombuffer("\n\n".join(parts).encode("utf-8")[:max_bytes], dtype=np.uint8)
    return data.astype(np.int64)


def train(cfg: GPT2Config, steps: int, batch: int = 16, lr: float = 3e-3, seed: int = 0,
          log_every: int = 50, max_bytes: int = 400_000) -> tuple[GPT2LMHeadModel, list[float]]:
    rm.manual_seed(seed)
    data = corpus(max_bytes)
    model = GPT2LMHeadModel(cfg)
    init_scale_residuals(model)
    opt = AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    n = cfg.n_positions
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(steps):
        for g in opt.param_groups:  # cosine decay to 10 % of lr
            g["lr"] = lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / max(1, steps))))
        at = rng.integers(0, data.size - n - 1, batch)
        window = np.stack([data[i:i + n + 1] for i in at])
        logits = model(rm.tensor(window[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), rm.tensor(window[:, 1:].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:5d}  loss {losses[-1]:.3f}  ({time.perf_counter() - start:.0f} s)", flush=True)
    model.eval()
    return model, losses


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rumus demo lm", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", default="rumus-lm", help="checkpoint directory (config.json + model.safetensors)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--context", type=int, default=128, help="n_positions: training window = longest prompt + output")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--encoder-steps", type=int, default=150,
                   help="SimCSE steps for the /v1/embeddings encoder saved in OUT/encoder (0: no encoder)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if min(a.steps, a.n_layer, a.n_embd, a.n_head, a.context, a.batch) < 1:
        p.error("--steps, --n-layer, --n-embd, --n-head, --context and --batch must be >= 1")
    cfg = GPT2Config(vocab_size=VOCAB_SIZE, n_positions=a.context, n_embd=a.n_embd, n_layer=a.n_layer,
                     n_head=a.n_head)
    print(f"training a byte-level GPT-2 ({cfg.n_layer} layers, {cfg.n_embd} wide) on Python's own text")
    model, losses = train(cfg, a.steps, a.batch, a.lr, a.seed)
    save_checkpoint(model, a.out)
    prompt = encode("Beautiful is ")[: cfg.n_positions - 1]
    sample = _greedy(model, prompt, min(40, cfg.n_positions - len(prompt)))
    print(f"final loss {losses[-1]:.3f} (uniform guess: {math.log(VOCAB_SIZE):.3f}); saved {a.out}/")
    print(f"greedy sample: {decode(prompt + sample)!r}")
    if a.encoder_steps > 0:
        from .encoder import ENCODER_DIR, BertConfig, save_encoder, train_simcse
        print(f"training the embeddings encoder (BERT-style, {a.n_embd} wide, unsupervised SimCSE)")
        enc_cfg = BertConfig(vocab_size=VOCAB_SIZE, hidden_size=a.n_embd, num_attention_heads=a.n_head,
                             intermediate_size=4 * a.n_embd, max_position_embeddings=a.context)
        encoder = train_simcse(corpus(), enc_cfg, a.encoder_steps, length=min(48, a.context), seed=a.seed)
        save_encoder(encoder, os.path.join(a.out, ENCODER_DIR))
        print(f"saved {a.out}/{ENCODER_DIR}/")
    return 0


def _greedy(model: GPT2LMHeadModel, prompt: list[int], n: int) -> list[int]:
    from .engine import Engine
    from .sampling import SamplingParams
    return Engine(model, max_running=1).run([prompt], SamplingParams(max_tokens=n))[0]
