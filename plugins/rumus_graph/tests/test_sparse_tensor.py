"""SparseTensor: construction from COO / CSR / edge_index, validation, dense form, transpose, sums."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import IndexOutOfRange, ShapeError
from rumus_graph import SparseTensor


def _dense(row: np.ndarray, col: np.ndarray, val: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape)
    np.add.at(out, (row, col), val)
    return out


def _coo(rng: np.random.Generator, n: int, m: int, nnz: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return rng.integers(0, n, nnz), rng.integers(0, m, nnz), rng.uniform(-1, 1, nnz)


def test_from_coo_to_dense_sums_duplicates(device: str) -> None:
    rng = np.random.default_rng(0)
    row, col, val = _coo(rng, 7, 5, 30)  # 30 entries in 35 cells: duplicates certain
    a = SparseTensor.from_coo(row, col, val, shape=(7, 5), device=device)
    np.testing.assert_allclose(a.to_dense().numpy(), _dense(row, col, val, (7, 5)), rtol=1e-6, atol=1e-6)


def test_transpose_matches_dense_transpose(device: str) -> None:
    rng = np.random.default_rng(1)
    row, col, val = _coo(rng, 6, 9, 25)
    a = SparseTensor.from_coo(row, col, val, shape=(6, 9), device=device)
    at = a.t()
    assert at.shape == (9, 6)
    np.testing.assert_allclose(at.to_dense().numpy(), _dense(row, col, val, (6, 9)).T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(at.t().to_dense().numpy(), _dense(row, col, val, (6, 9)), rtol=1e-6, atol=1e-6)


def test_row_and_column_sums(device: str) -> None:
    rng = np.random.default_rng(2)
    row, col, val = _coo(rng, 8, 4, 20)
    a = SparseTensor.from_coo(row, col, val, shape=(8, 4), device=device)
    d = _dense(row, col, val, (8, 4))
    np.testing.assert_allclose(a.sum(1).numpy(), d.sum(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a.sum(0).numpy(), d.sum(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a.degree(1), np.bincount(row, minlength=8))


def test_from_edge_index_puts_targets_on_rows() -> None:
    ei = np.array([[0, 0, 2], [1, 2, 1]])  # edges 0->1, 0->2, 2->1
    a = SparseTensor.from_edge_index(ei, num_nodes=3)
    want = np.zeros((3, 3))
    want[1, 0] = want[2, 0] = want[1, 2] = 1
    np.testing.assert_array_equal(a.to_dense().numpy(), want)


def test_from_csr_round_trip() -> None:
    a = SparseTensor.from_csr(np.array([0, 2, 2, 3]), np.array([1, 0, 2]), np.array([1.0, 2.0, 3.0]), shape=(3, 3))
    np.testing.assert_array_equal(a.to_dense().numpy(), [[2, 1, 0], [0, 0, 0], [0, 0, 3]])


def test_values_keep_their_gradient_through_the_row_sort() -> None:
    v = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = SparseTensor.from_coo([2, 0, 1], [0, 1, 2], v, shape=(3, 3))
    x = rm.tensor([[1.0], [10.0], [100.0]])
    (a @ x).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [1.0, 10.0, 100.0])  # d/dv_k = x[col_k]


@pytest.mark.parametrize("row,col,shape,match", [
    ([0, 3], [0, 1], (3, 3), "row\\[1\\] = 3"),
    ([0, 1], [0, -1], (3, 3), "col\\[1\\] = -1"),
    ([0, 1], [0, 5], (3, 3), "out of range"),
])
def test_out_of_range_indices_raise(row: list[int], col: list[int], shape: tuple[int, int], match: str) -> None:
    with pytest.raises(IndexOutOfRange, match=match):
        SparseTensor.from_coo(row, col, shape=shape)


def test_bad_csr_and_shapes_raise() -> None:
    with pytest.raises(IndexOutOfRange, match="never decrease"):
        SparseTensor.from_csr([0, 2, 1], [0, 1])
    with pytest.raises(IndexOutOfRange, match="ends at"):
        SparseTensor.from_csr([0, 1, 3], [0, 1])
    with pytest.raises(ShapeError, match="same length"):
        SparseTensor.from_coo([0, 1], [0])
    with pytest.raises(ShapeError, match="values must have shape"):
        SparseTensor.from_coo([0, 1], [0, 1], [1.0])
    with pytest.raises(ShapeError, match=r"\(2, num_edges\)"):
        SparseTensor.from_edge_index(np.zeros((3, 4), np.int64))
