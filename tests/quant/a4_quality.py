"""SPEC A4's TinyGPT, trained as the acceptance test trains it, then quantized every way: the A4 row of the
quality table (loss on the A4 pattern batch; the task is deterministic, so the batch is also its held-out set)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import rumus as rm
from rumus.nn import functional as F


def a4_cases() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "nn" / "test_acceptance_a3_a4.py"
    spec = importlib.util.spec_from_file_location("a4_acceptance_cases", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def train(steps: int = 200) -> tuple[rm.nn.Module, ModuleType]:
    a4 = a4_cases()
    rm.manual_seed(0)
    model = a4.TinyGPT().to(a4.DEVICE)
    opt = rm.optim.AdamW(model.parameters(), lr=0.001)
    x, y = a4.pattern_batch()
    for _ in range(steps):
        loss = F.cross_entropy(model(x).reshape(a4.BATCH * a4.SEQ, a4.VOCAB), y.reshape(a4.BATCH * a4.SEQ))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, a4


def quality_table(model: rm.nn.Module, a4: ModuleType) -> list[tuple[str, int | None, float, float]]:
    x, y = a4.pattern_batch()

    def loss_of(m: rm.nn.Module) -> float:
        with rm.no_grad():
            return float(F.cross_entropy(m(x).reshape(-1, a4.VOCAB), y.reshape(-1)).item())

    def clone() -> rm.nn.Module:
        other = a4.TinyGPT().to(a4.DEVICE)
        other.load_state_dict(model.state_dict())
        return other
    base = loss_of(model)
    rows: list[tuple[str, int | None, float, float]] = [("float32", None, base, math.exp(base))]
    loss = loss_of(rm.quant.quantize(clone(), "q8", 32, "rtn"))
    rows.append(("q8 rtn", 32, loss, math.exp(loss)))
    for g in (32, 128):
        for method in ("rtn", "gptq", "awq"):
            loss = loss_of(rm.quant.quantize(clone(), "int4", g, method, calib=[x]))
            rows.append((f"int4 {method}", g, loss, math.exp(loss)))
    return rows


if __name__ == "__main__":  # python -m tests.quant.a4_quality is not importable; run: python tests/quant/a4_quality.py
    trained, cases = train()
    print("| weights   | group | A4 loss | perplexity |\n|-----------|-------|---------|------------|")
    for name, g, loss, ppl in quality_table(trained, cases):
        print(f"| {name:<9} | {g or '-':<5} | {loss:.4f}  | {ppl:.3f}      |")
