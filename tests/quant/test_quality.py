"""A small LM trained here, quantized every way: GPTQ and AWQ must beat round-to-nearest on held-out data."""

from __future__ import annotations

import math

import pytest

from . import tiny_lm

pytestmark = pytest.mark.slow  # trains a model: ~30 s of CPU time


@pytest.fixture(scope="module")
def table() -> dict[tuple[str, int | None], float]:
    model, data = tiny_lm.train()
    rows = tiny_lm.quality_table(model, data)
    return {(name, g): loss for name, g, loss, _ in rows}


def test_the_model_learned_something(table: dict[tuple[str, int | None], float]) -> None:
    assert table[("float32", None)] < math.log(tiny_lm.VOCAB) - 0.3


def test_q8_is_nearly_lossless(table: dict[tuple[str, int | None], float]) -> None:
    assert abs(table[("q8 rtn", 32)] - table[("float32", None)]) < 2e-3


@pytest.mark.parametrize("g", [32, 128])
@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_gptq_and_awq_beat_rtn_on_held_out_data(table: dict[tuple[str, int | None], float], g: int,
                                                method: str) -> None:
    assert table[(f"int4 {method}", g)] < table[("int4 rtn", g)]
