"""`rumus demo lm`: train a small byte-level GPT-2 on text that ships with Python itself, offline, and save a
checkpoint `rumus serve` can load (under runs/demo-lm by default), a plot of its loss, and an embeddings
encoder. The language model learns the Zen of Python by heart, which takes about a minute on two cores and
gives a greedy sample that reads as text; the encoder trains on the Zen and a few standard-library sources.

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

from ..utils.cli_args import positive_float
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


def zen_of_python() -> np.ndarray:
    """The Zen of Python alone, as int64 bytes (the start of `corpus()`)."""
    full = corpus()
    text = decode(full.tolist())
    end = text.find("\n\n", text.find("Namespaces"))  # the Zen's last line starts with "Namespaces"
    return full[:len(text[:end].encode("utf-8")) + 1]


def train(cfg: GPT2Config, steps: int, batch: int = 16, lr: float = 3e-3, seed: int = 0,
          log_every: int = 50, max_bytes: int = 400_000,
          data: np.ndarray | None = None) -> tuple[GPT2LMHeadModel, list[float]]:
    """Train a GPT2LMHeadModel on random windows of `data` (default: `corpus(max_bytes)`); (model, losses)."""
    rm.manual_seed(seed)
    data = corpus(max_bytes) if data is None else data
    model = GPT2LMHeadModel(cfg)
    init_scale_residuals(model)
    opt = AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    n = cfg.n_positions
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(steps):
        for g in opt.param_groups:  # a short linear warm-up, then cosine decay to 10 % of lr
            warm = min(1.0, (step + 1) / max(1, min(50, steps // 10)))
            g["lr"] = lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / max(1, steps))))
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
    p = argparse.ArgumentParser(prog="rumus demo lm",
                                description=" ".join(__doc__.split("\n\n")[0].split()) if __doc__ else None)
    p.add_argument("--out", default=os.path.join("runs", "demo-lm"),
                   help="checkpoint directory: config.json, model.safetensors, loss.png (default: ./runs/demo-lm)")
    p.add_argument("--steps", type=int, default=400, help="training steps of the language model (default: 400)")
    p.add_argument("--n-layer", type=int, default=2, help="transformer blocks (default: 2)")
    p.add_argument("--n-embd", type=int, default=64, help="model width (default: 64)")
    p.add_argument("--n-head", type=int, default=4, help="attention heads (default: 4)")
    p.add_argument("--context", type=int, default=48,
                   help="n_positions, the training window and the longest prompt + output (default: 48)")
    p.add_argument("--batch", type=int, default=16, help="windows per step (default: 16)")
    p.add_argument("--lr", type=positive_float, default=3e-3, help="AdamW's peak learning rate (default: 0.003)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and windows (default: 0)")
    p.add_argument("--text", choices=("zen", "stdlib"), default="zen",
                   help="what the language model reads: the Zen of Python (learned by heart: a readable sample "
                        "in a minute) or the Zen and stdlib sources (needs far more steps) (default: zen)")
    p.add_argument("--encoder-steps", type=int, default=60,
                   help="SimCSE steps for the /v1/embeddings encoder saved in OUT/encoder, 0: none (default: 60)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if min(a.steps, a.n_layer, a.n_embd, a.n_head, a.context, a.batch) < 1:
        p.error("--steps, --n-layer, --n-embd, --n-head, --context and --batch must be >= 1")
    cfg = GPT2Config(vocab_size=VOCAB_SIZE, n_positions=a.context, n_embd=a.n_embd, n_layer=a.n_layer,
                     n_head=a.n_head)
    started = time.perf_counter()
    print(f"training a byte-level GPT-2 ({cfg.n_layer} layers, {cfg.n_embd} wide) on "
          f"{'the Zen of Python' if a.text == 'zen' else 'the Zen and stdlib sources'}")
    model, losses = train(cfg, a.steps, a.batch, a.lr, a.seed, data=zen_of_python() if a.text == "zen" else None)
    save_checkpoint(model, a.out)
    plot = _plot_losses(losses, os.path.join(a.out, "loss.png"))
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
    print(f"loss curve: {plot}" if plot else "loss curve: not drawn (pip install matplotlib, or the demo extra)")
    print(f"done in {time.perf_counter() - started:.0f} s. Next, serve it and ask for text:")
    print(f"  rumus serve {a.out} --port 8000")
    print("  curl -s localhost:8000/v1/completions -d '{\"prompt\": \"Beautiful is \", \"max_tokens\": 30, "
          "\"temperature\": 0}'")
    return 0


def _plot_losses(losses: list[float], path: str) -> str | None:
    """A PNG of the training loss (log scale) against the step; None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(len(losses)), losses, label="training loss")
    ax.axhline(math.log(VOCAB_SIZE), color="gray", linestyle="--", linewidth=1, label="uniform guess (ln 256)")
    ax.set(title="rumus demo lm", xlabel="step", ylabel="cross-entropy (nats, log scale)", yscale="log")
    ax.legend()
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def _greedy(model: GPT2LMHeadModel, prompt: list[int], n: int) -> list[int]:
    from .engine import Engine
    from .sampling import SamplingParams
    return Engine(model, max_running=1).run([prompt], SamplingParams(max_tokens=n))[0]
