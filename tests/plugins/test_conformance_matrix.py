"""The conformance matrix: only rows that ran, at most 120 columns, distinct column headers (the 16
fixed_i16(k) scales share one `fx16` column holding the worst outcome over the scales)."""

from __future__ import annotations

from rumus_conformance.matrix import WIDTH, Matrix, column, render


def _render(cells: list[tuple[str, str, str]]) -> list[str]:
    matrix = Matrix()
    for op, dtype, outcome in cells:
        for kind in ("test_forward", "test_noncontiguous"):
            matrix.record(op, dtype, kind, outcome)
    return render(matrix, "cpu").splitlines()


def test_only_rows_that_ran_within_120_columns_with_distinct_headers():
    cells = [("add", "float32", "passed"), ("add", "int64", "passed")]
    cells += [("fixed_relu", f"fixed_i16({k})", "passed") for k in range(16)]
    lines = _render(cells)
    assert all(len(line) <= WIDTH for line in lines)
    header = lines[1].split()
    assert header[0] == "op" and len(header) == len(set(header))
    assert "fx16" in header and not any("fixed_i16" in h for h in header)
    rows = [line.split()[0] for line in lines[2:] if line.split() and line.split()[0] in ("add", "fixed_relu", "sub")]
    assert rows == ["add", "fixed_relu"]  # `sub` is claimed on cpu but did not run: no row


def test_a_failing_scale_shows_in_the_grouped_column():
    cells = [("fixed_relu", f"fixed_i16({k})", "passed") for k in range(16)]
    cells[7] = ("fixed_relu", "fixed_i16(7)", "failed")
    lines = _render(cells)
    header = lines[1].split()
    row = next(line.split() for line in lines if line.startswith("fixed_relu"))
    assert row[header.index("fx16")] == "FAIL"
    assert "FAIL 1" in next(line for line in lines if line.startswith("cells:"))


def test_column_names():
    assert [column(d) for d in ("float32", "bfloat16", "uint8", "bool", "fixed_i16(15)", "q8(32)", "int4(64)")] == \
        ["f32", "bf16", "u8", "bool", "fx16", "q8", "i4"]
