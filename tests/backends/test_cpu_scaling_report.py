"""benchmarks/cpu_scaling.py's and cpu_busy_neighbour.py's summaries: the worst increase from one thread count
to the next, rounds combined into a median with their spread, ratios paired within a round, the SLOWER flag,
the run-time thread setting and the busy neighbour (the numbers the 16-core table is judged by)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import cpu_busy_neighbour as bn  # noqa: E402
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


def test_counts_alternate_direction_every_round() -> None:
    assert cs._round_order([1, 2, 4], 0) == [1, 2, 4]
    assert cs._round_order([1, 2, 4], 1) == [4, 2, 1]
    assert cs._round_order([1, 2, 4], 2) == [1, 2, 4]


def _block(n: int, kind: str, **cases: float) -> dict[str, Any]:
    return {"threads": n, "kind": kind, "cases": {c: [t, 0.01, 5] for c, t in cases.items()}}


def test_ratios_are_paired_within_each_round() -> None:
    # the host got 2x slower in round 2: alone and busy both; the paired ratio stays 1.1
    rounds = [[_block(4, "alone", step=1.0), _block(4, "busy", step=1.1)],
              [_block(4, "busy", step=2.2), _block(4, "alone", step=2.0)],
              [_block(4, "alone", step=1.0), _block(4, "busy", step=1.1), _block(2, "busy", step=9.0)]]
    alone, busy, ratios = cs._paired(rounds, "alone", "busy", 4)["step"]
    assert ratios == pytest.approx([1.1, 1.1, 1.1])
    assert (alone, busy) == (1.0, 1.1)
    assert cs._paired(rounds, "alone", "busy", 2) == {}  # no alone block at 2 threads to pair with


def _raw(rumus: list[list[float]], torch: list[list[float]]) -> dict[str, Any]:
    """Per library and round, the times of case "MLP step" at 1 and 2 threads."""
    def rounds(times: list[list[float]]) -> list[list[dict[str, Any]]]:
        return [[_block(n, "alone", **{"MLP step": t}) for n, t in zip((1, 2), r)] for r in times]
    return {"counts": [1, 2], "cpus": 2, "hog_cpu": 1, "libs": {"rumus": rounds(rumus), "torch": rounds(torch)}}


def test_table_flags_a_slowdown_beyond_the_spread() -> None:
    # +30% from 1 to 2 threads in every round, rounds within 2%: SLOWER
    lines = cs.table(_raw([[1.0, 1.3], [1.02, 1.31], [0.99, 1.29]], [[1.0, 0.6]] * 3))
    assert "SLOWER" in lines[2] and "+30% (1→2)" in lines[2]
    assert lines[-1] == "rows more than 10% slower at a higher count: MLP step: +30% (1→2) SLOWER"
    assert "1e+03 / 1e+03 (1.00×)" in lines[2]  # medians in ms, rumus / torch
    # the same +15% median increase, rounds 40% apart at 1 thread: noise, not a finding
    lines = cs.table(_raw([[1.0, 1.15], [0.7, 1.15], [1.1, 1.15]], [[1.0, 0.6]] * 3))
    assert "(noise?)" in lines[2] and "SLOWER" not in "\n".join(lines)
    lines = cs.table(_raw([[1.0, 0.6]] * 3, [[1.0, 1.5]] * 3))  # torch getting slower is not RUMUS's flag
    assert lines[-1].endswith(": none")


def test_busy_neighbour_verdict_uses_the_median_paired_ratio() -> None:
    raw = {"counts": [2], "cpus": 2, "libs": {"rumus": [
        [_block(2, "alone", **{"MLP step": 1.0}), _block(2, "busy", **{"MLP step": 1.3})],
        [_block(2, "busy", **{"MLP step": 3.0}), _block(2, "alone", **{"MLP step": 2.0})],
        [_block(2, "alone", **{"MLP step": 1.0}), _block(2, "busy", **{"MLP step": 1.2})]]}}
    (row,) = bn.rows(raw)
    assert "| 1.30× | 1.20–1.50× | ≤ 1.33× | within |" in row
    raw["libs"]["rumus"][0][1]["cases"]["MLP step"][0] = 1.6  # two rounds over: median 1.5x
    assert bn.rows(raw)[0].endswith("| 1.50× | 1.20–1.60× | ≤ 1.33× | **over** |")


def test_a_thread_count_that_does_not_take_fails_loudly() -> None:
    with pytest.raises(SystemExit, match=r"set_num_threads\(4\) left get_num_threads\(\) at 2"):
        cs._set_threads("lib", lambda n: None, lambda: 2, 4)
    from rumus_cpu import threads as rt  # the real budget is set at run time and reads back
    before = rt.get_num_threads()
    try:
        cs._set_threads("rumus", rt.set_num_threads, rt.get_num_threads, 3)
        assert rt.get_num_threads() == 3
    finally:
        rt.set_num_threads(before)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="pins with sched_setaffinity")
def test_busy_neighbour_spins_pinned_and_is_gone_after() -> None:
    cpu = cs._hog_cpu()
    with cs._hogging(cpu) as hog:
        assert hog.poll() is None and os.sched_getaffinity(hog.pid) == {cpu}
    assert hog.poll() is not None
