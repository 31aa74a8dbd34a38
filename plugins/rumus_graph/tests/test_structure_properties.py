"""Property test of the structure bundle: for any entries, both orientations describe the same matrix."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rumus_graph.structure import bundle, row_order, rows_of


@st.composite
def entries(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, int]:
    n, m = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    k = draw(st.integers(0, 25)) if n and m else 0
    row = np.array(draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=k, max_size=k)), np.int64)
    col = np.array(draw(st.lists(st.integers(0, max(m - 1, 0)), min_size=k, max_size=k)), np.int64)
    return row, col, n, m


@given(entries())
def test_both_orientations_hold_the_same_entries(e: tuple[np.ndarray, np.ndarray, int, int]) -> None:
    row, col, n, m = e
    order = row_order(row)
    b = bundle(row[order], col[order], n, m)
    assert b.rowptr.dtype == np.int32 and b.rowptr.size == n + 1 and b.csc_ptr.size == m + 1
    by_row = sorted(zip(rows_of(b.rowptr).tolist(), b.col.tolist(), range(row.size)))
    assert [(r, c) for r, c, _ in by_row] == sorted(zip(row.tolist(), col.tolist()))
    # column order: each column's entries, pointing back at the same (row, col) through csc_eid
    cols_of_csc = rows_of(b.csc_ptr)
    assert np.array_equal(b.col[b.csc_eid], cols_of_csc)
    assert np.array_equal(rows_of(b.rowptr)[b.csc_eid], b.csc_row)
    assert sorted(b.csc_eid.tolist()) == list(range(row.size))
