"""benchmarks/cpu_scaling.py's summary: the worst increase from one thread count to the next, and rounds
combined into a median with their spread (the numbers the 16-core table is judged by)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import cpu_scaling as cs  # noqa: E402


def test_worst_step_is_between_neighbouring_counts() -> None:
    # 16-core table, GEMM 128x784x256: only 8 -> 16 got slower
    got, i = cs._worst_step([0.486, 0.289, 0.221, 0.135, 0.167])
    assert i == 3 and got == pytest.approx(0.167 / 0.135 - 1)
    assert cs._worst_step([3.0, 2.0, 1.0]) == (0.0, -1)
    # the MLP row: 1 -> 2 (+16.4%) beats 4 -> 8 (+11.4%)
    got, i = cs._worst_step([2.86, 3.33, 2.11, 2.35, 2.07])
    assert i == 0 and got == pytest.approx(3.33 / 2.86 - 1)


def test_rounds_combine_into_median_and_spread() -> None:
    got = cs._combine([{"a": (1.0, 0.05)}, {"a": (1.2, 0.02)}, {"a": (0.9, 0.01)}])
    assert got["a"][0] == 1.0
    assert got["a"][1] == pytest.approx(0.3)  # the range between rounds exceeds every round's own spread
    med, spread = cs._median_spread([1.0, 1.0, 1.0, 1.0, 2.0])
    assert med == 1.0 and spread >= 0
