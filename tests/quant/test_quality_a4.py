"""The A4 row of the quantization quality table: TinyGPT (SPEC A4) trained to its threshold keeps it under
every scheme; Q8 is nearly lossless, and GPTQ / AWQ do no worse than round-to-nearest beyond noise."""

from __future__ import annotations

import pytest

from . import a4_quality

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def table() -> dict[tuple[str, int | None], float]:
    model, a4 = a4_quality.train()
    return {(name, g): loss for name, g, loss, _ in a4_quality.quality_table(model, a4)}


def test_float32_meets_a4(table: dict[tuple[str, int | None], float]) -> None:
    assert table[("float32", None)] < 1.0


def test_every_scheme_keeps_a4_under_its_threshold(table: dict[tuple[str, int | None], float]) -> None:
    for key, loss in table.items():
        assert loss < 1.0, (key, loss)


def test_q8_is_nearly_lossless(table: dict[tuple[str, int | None], float]) -> None:
    assert abs(table[("q8 rtn", 32)] - table[("float32", None)]) < 5e-3


@pytest.mark.parametrize("g", [32, 128])
@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_calibrated_int4_is_no_worse_than_rtn(table: dict[tuple[str, int | None], float], g: int, method: str) -> None:
    assert table[(f"int4 {method}", g)] <= table[("int4 rtn", g)] + 5e-3
