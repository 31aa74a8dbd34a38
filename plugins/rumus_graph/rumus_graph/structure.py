"""The index arrays every sparse kernel of this plugin reads, built and checked on the host (numpy).

A sparse matrix A of shape (n_rows, n_cols) with nnz stored entries is described by five int32 arrays,
the *structure bundle*, so that both A @ X and A.T @ X run atomic-free (one output row per thread):

    rowptr  (n_rows + 1,)  CSR row pointers; entries are stored sorted by row (stable in input order)
    col     (nnz,)         column of each stored entry
    csc_ptr (n_cols + 1,)  pointers of the same entries grouped by column (the transpose's CSR)
    csc_row (nnz,)         row of the k-th entry in column order
    csc_eid (nnz,)         position (in row order) of the k-th entry in column order: its value index

The transpose is computed once here, where the structure is built, so no backward pass ever sorts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rumus_contracts import IndexOutOfRange, ShapeError

INDEX = np.int32
MAX_INDEX = np.iinfo(np.int32).max


class Bundle(NamedTuple):
    rowptr: np.ndarray
    col: np.ndarray
    csc_ptr: np.ndarray
    csc_row: np.ndarray
    csc_eid: np.ndarray


def check_indices(what: str, idx: np.ndarray, bound: int) -> np.ndarray:
    """`idx` as a 1-D int64 array whose values lie in [0, bound); IndexOutOfRange names the first bad one."""
    arr = np.asarray(idx)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise ShapeError(f"{what} must hold integers, got dtype {arr.dtype}; convert with .astype(np.int64)")
    arr = arr.reshape(-1).astype(np.int64, copy=False)
    if arr.size:
        bad = np.flatnonzero((arr < 0) | (arr >= bound))
        if bad.size:
            k = int(bad[0])
            raise IndexOutOfRange(f"{what}[{k}] = {int(arr[k])} is out of range for size {bound} "
                                  f"({bad.size} bad entr{'y' if bad.size == 1 else 'ies'}); "
                                  f"indices must lie in [0, {bound})")
    return arr


def check_size(what: str, n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 or n > MAX_INDEX:
        raise ShapeError(f"{what} must be an int in [0, {MAX_INDEX}], got {n!r}")
    return int(n)


def row_order(row: np.ndarray) -> np.ndarray:
    """The stable permutation that sorts entries by row."""
    return np.argsort(row, kind="stable")


def pointers(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(sorted_keys, minlength=n), out=ptr[1:])
    return ptr.astype(INDEX)


def bundle(row: np.ndarray, col: np.ndarray, n_rows: int, n_cols: int) -> Bundle:
    """The structure bundle of entries (row[k], col[k]) that are ALREADY sorted by row (see row_order)."""
    n_rows, n_cols = check_size("n_rows", n_rows), check_size("n_cols", n_cols)
    row = check_indices("row", row, n_rows)
    col = check_indices("col", col, n_cols)
    if row.size != col.size:
        raise ShapeError(f"row and col must have the same length, got {row.size} and {col.size}")
    if row.size > MAX_INDEX:
        raise ShapeError(f"{row.size} entries exceed the int32 indices of the sparse kernels ({MAX_INDEX})")
    if row.size and np.any(row[1:] < row[:-1]):
        raise ShapeError("entries must be sorted by row; build the bundle through SparseTensor, which sorts")
    csc_eid = np.argsort(col, kind="stable")
    return Bundle(pointers(row, n_rows), col.astype(INDEX), pointers(col[csc_eid], n_cols),
                  row[csc_eid].astype(INDEX), csc_eid.astype(INDEX))


def random_bundle(rng: np.random.Generator, n_rows: int, n_cols: int, nnz: int) -> tuple[Bundle, np.ndarray]:
    """A random structure (duplicates allowed, some rows and columns empty) and its row index per entry."""
    if n_rows == 0 or n_cols == 0:
        nnz = 0
    row = np.sort(rng.integers(0, max(n_rows, 1), nnz))
    col = rng.integers(0, max(n_cols, 1), nnz)
    return bundle(row, col, n_rows, n_cols), row


def rows_of(rowptr: np.ndarray) -> np.ndarray:
    """The row of each stored entry, from CSR row pointers."""
    ptr = np.asarray(rowptr, np.int64)
    return np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
