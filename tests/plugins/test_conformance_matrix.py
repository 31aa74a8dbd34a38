"""The conformance matrix: only rows that ran, at most 120 columns, distinct column headers (the 16
fixed_i16(k) scales share one `fx16` column holding the worst outcome over the scales), labels from
each cell's structured outcome."""

from __future__ import annotations

from rumus_conformance.matrix import WIDTH, column, render
from rumus_conformance.outcomes import (
    FAIL, MISSING, OK_DECOMPOSED, OK_KERNEL, CellResult, Mismatch, Results,
)


def _render(cells: list[tuple[str, str, str]], missing: tuple[str, ...] = ()) -> list[str]:
    results = Results()
    for op, dtype, outcome in cells:
        for check in ("forward", "noncontiguous"):
            worst = Mismatch("output 0: 1 of 4 elements differ", 3.0) if outcome == FAIL else None
            results.record(CellResult(op, dtype, check, outcome, worst=worst, failed=int(worst is not None), ran=2,
                                      missing=missing if outcome == MISSING else ()))
    return render(results, "cpu").splitlines()


def test_only_rows_that_ran_within_120_columns_with_distinct_headers():
    cells = [("add", "float32", OK_KERNEL), ("add", "int64", OK_KERNEL)]
    cells += [("fixed_relu", f"fixed_i16({k})", OK_KERNEL) for k in range(16)]
    lines = _render(cells)
    assert all(len(line) <= WIDTH for line in lines)
    header = lines[1].split()
    assert header[0] == "op" and len(header) == len(set(header))
    assert "fx16" in header and not any("fixed_i16" in h for h in header)
    rows = [line.split()[0] for line in lines[2:] if line.split() and line.split()[0] in ("add", "fixed_relu", "sub")]
    assert rows == ["add", "fixed_relu"]  # `sub` is claimed on cpu but did not run: no row


def test_a_failing_scale_shows_in_the_grouped_column():
    cells = [("fixed_relu", f"fixed_i16({k})", OK_KERNEL) for k in range(16)]
    cells[7] = ("fixed_relu", "fixed_i16(7)", FAIL)
    lines = _render(cells)
    header = lines[1].split()
    row = next(line.split() for line in lines if line.startswith("fixed_relu"))
    assert row[header.index("fx16")] == "FAIL"
    assert "FAIL 1" in next(line for line in lines if line.startswith("cells (op x dtype"))
    assert "  FAIL fixed_relu fixed_i16(7) forward: 1 of 2 samples failed" in "\n".join(lines)


def test_labels_and_missing_primitives_ranked_by_cells():
    lines = _render([("logsumexp", "float32", MISSING), ("amax", "float32", MISSING), ("exp", "float32", FAIL),
                     ("softmax", "float32", OK_DECOMPOSED), ("add", "float32", OK_KERNEL)], missing=("amax",))
    rows = {line.split()[0]: line.split()[1] for line in lines[2:7]}
    assert rows == {"add": "ok", "amax": "MISS", "exp": "FAIL", "logsumexp": "MISS", "softmax": "dec"}
    head = lines.index(next(line for line in lines if line.startswith("missing primitives, ranked")))
    assert lines[head + 1].split()[:3] == ["amax", "2", "cells"]


def test_column_names():
    assert [column(d) for d in ("float32", "bfloat16", "uint8", "bool", "fixed_i16(15)", "q8(32)", "int4(64)")] == \
        ["f32", "bf16", "u8", "bool", "fx16", "q8", "i4"]


def test_a_missing_op_outside_the_primitives_is_marked(monkeypatch):
    import rumus_contracts
    monkeypatch.setattr(rumus_contracts, "PRIMITIVES", frozenset({"amax"}), raising=False)
    results = Results()
    results.record(CellResult("logsumexp", "float32", "forward", MISSING, missing=("amax",)))
    results.record(CellResult("cross_entropy", "float32", "forward", MISSING, missing=("log_softmax",)))
    lines = render(results, "cpu").splitlines()
    amax = next(line for line in lines if line.split()[:1] == ["amax"])
    log_softmax = next(line for line in lines if line.split()[:1] == ["log_softmax"])
    assert "not a primitive" not in amax and "not a primitive" in log_softmax
