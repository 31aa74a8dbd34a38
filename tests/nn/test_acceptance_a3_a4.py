"""SPEC A3 (3-class classifier through the Trainer) and A4 (TinyGPT), on the default device (RUMUS_BACKEND)."""

from __future__ import annotations

import math

import numpy as np
from tiny_models import three_class_data

import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus.train import Trainer

DEVICE = rm.default_device()


# ---- A3 ---------------------------------------------------------------------------------------------------

def test_a3_three_class_classifier_with_trainer():
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(DEVICE)
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), progress=False)
    x, y = three_class_data(DEVICE)

    assert trainer.average_loss == 0.0
    for _ in range(3):
        trainer.train_step((x, y))
    avg = trainer.average_loss
    assert math.isfinite(avg) and avg > 0.0
    trainer.reset_epoch()
    assert trainer.average_loss == 0.0

    history = trainer.fit((x, y), epochs=197)  # 3 + 197 = 200 optimizer steps, one full batch each
    assert trainer.global_step == 200 and len(history) == 197
    final = float(trainer.last_loss.item())
    print(f"A3 final loss {final:.4f}")
    assert final < 0.15, f"A3 final loss {final} is not below 0.15"
    with rm.no_grad():
        assert (rm.argmax(model(x), 1).numpy() == y.numpy()).all()


# ---- A4 ---------------------------------------------------------------------------------------------------

VOCAB, D, SEQ, BATCH = 4, 32, 6, 8


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.block = nn.TransformerBlock(D, 1, d_ff=4 * D, activation="gelu")
        self.ln_f = nn.LayerNorm(D, eps=1e-5)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx: rm.Tensor, kv_cache: nn.KVCache | None = None, start_pos: int = 0):
        positions = rm.arange(start_pos, start_pos + idx.shape[1], dtype=rm.int64, device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        if kv_cache is None:
            return self.head(self.ln_f(self.block(x)))
        x, kv_cache = self.block(x, kv_cache=kv_cache, start_pos=start_pos)
        return self.head(self.ln_f(x)), kv_cache


def pattern_batch() -> tuple[rm.Tensor, rm.Tensor]:
    b, s = np.meshgrid(np.arange(BATCH), np.arange(SEQ), indexing="ij")
    return rm.tensor((b + s) % VOCAB, device=DEVICE), rm.tensor((b + s + 1) % VOCAB, device=DEVICE)


def greedy(model: TinyGPT, prompt: list[int], steps: int, use_cache: bool) -> list[int]:
    tokens = list(prompt)
    with rm.no_grad():
        if not use_cache:
            for _ in range(steps):
                logits = model(rm.tensor([tokens], device=DEVICE))
                tokens.append(int(rm.argmax(logits[0, -1]).item()))
            return tokens
        cache = model.block.new_cache(1, SEQ)
        logits, cache = model(rm.tensor([tokens], device=DEVICE), kv_cache=cache, start_pos=0)
        for _ in range(steps):
            nxt = int(rm.argmax(logits[0, -1]).item())
            tokens.append(nxt)
            if len(tokens) >= SEQ + 1:
                break
            logits, cache = model(rm.tensor([[nxt]], device=DEVICE), kv_cache=cache, start_pos=len(tokens) - 1)
        return tokens


def test_a4_tiny_gpt_learns_the_pattern_and_generates_it():
    rm.manual_seed(0)
    model = TinyGPT().to(DEVICE)
    opt = rm.optim.AdamW(model.parameters(), lr=0.001)
    x, y = pattern_batch()
    loss = None
    for _ in range(200):
        logits = model(x)  # causal self-attention inside the block
        loss = F.cross_entropy(logits.reshape(BATCH * SEQ, VOCAB), y.reshape(BATCH * SEQ))
        loss.backward()
        opt.step()
        opt.zero_grad()
    final = float(loss.item())
    print(f"A4 final loss {final:.4f}")
    assert final < 1.0, f"A4 final loss {final} is not below 1.0"

    model.eval()
    for start in range(VOCAB):
        prompt = [start, (start + 1) % VOCAB]
        full = greedy(model, prompt, SEQ - len(prompt), use_cache=False)
        cached = greedy(model, prompt, SEQ - len(prompt), use_cache=True)
        assert full == [(start + i) % VOCAB for i in range(SEQ)], f"greedy generation {full} breaks the pattern"
        assert cached == full, f"KV-cache generation {cached} differs from full recomputation {full}"
