"""Sparse COO tensors against torch's: construction, coalesce, to_dense, to_sparse, sparse.mm / spmm and
their gradients (values and the dense operand), the same code in both libraries."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
import torch

import rumus

LIBS = [pytest.param(torch, id="torch"), pytest.param(rumus, id="rumus")]
IDX = np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]])  # (0, 2) twice: coalesce sums it
VALS = np.array([3.0, 4.0, 5.0, -1.0, 0.5])
DENSE = np.random.default_rng(2).normal(size=(3, 4))


def _run(lib: ModuleType) -> tuple[np.ndarray, ...]:
    v = lib.tensor(VALS, requires_grad=True)
    d = lib.tensor(DENSE, requires_grad=True)
    s = lib.sparse_coo_tensor(lib.tensor(IDX), v, (4, 3))
    prod = lib.sparse.mm(s, d)
    spmm = lib.spmm(s, d)
    (prod * lib.tensor(np.cos(np.arange(16)).reshape(4, 4))).sum().backward()
    c = s.coalesce()
    return (s.to_dense().detach().numpy(), prod.detach().numpy(), spmm.detach().numpy(), v.grad.numpy(),
            d.grad.numpy(), c.indices().numpy(), c.values().detach().numpy())


def test_products_dense_forms_and_gradients_match_torch() -> None:
    for got, want in zip(_run(rumus), _run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_to_sparse_and_back(lib: ModuleType) -> None:
    x = lib.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]])
    s = x.to_sparse()
    assert s.is_sparse and not x.is_sparse and s._nnz() == 3
    assert s._indices().tolist() == [[0, 1, 1], [1, 0, 2]] and s._values().tolist() == [2.0, 3.0, 4.0]
    np.testing.assert_array_equal(s.to_dense().numpy(), x.numpy())


def test_an_index_outside_the_size_is_refused_at_construction() -> None:
    """torch checks only with check_invariants=True and fails later otherwise; RUMUS always checks, since an
    index past the size would make to_dense and mm read out of range."""
    with pytest.raises(ValueError, match="outside the size"):
        rumus.sparse_coo_tensor(rumus.tensor([[0, 5]]), rumus.tensor([1.0, 2.0]), (3,))
