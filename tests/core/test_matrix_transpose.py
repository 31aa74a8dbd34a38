"""Tensor.mT (rumus._views.matrix_transpose): the last two dims swapped as a view, built without permute's
general checks; the same view, history and errors as transpose(-2, -1)."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import ShapeError


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 1, 3, 5)])
def test_mT_is_transpose_of_the_last_two_dims(shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(0).standard_normal(shape)
    t = rm.tensor(a)
    for src, ref in ((t, a), (t.transpose(0, -1), np.swapaxes(a, 0, -1))):  # contiguous and strided bases
        v = src.mT
        w = src.transpose(-2, -1)
        assert v.shape == w.shape and v._strides == w._strides and v._offset == w._offset
        np.testing.assert_array_equal(v.numpy(), np.swapaxes(ref, -2, -1))


def test_mT_of_fewer_than_two_dims_is_refused_as_transpose_does() -> None:
    with pytest.raises(ShapeError):
        _ = rm.tensor(np.ones(3)).mT


def test_mT_gradient_against_finite_differences() -> None:
    rng = np.random.default_rng(1)
    a, wt = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 3))

    def f(arr: np.ndarray) -> float:
        return float((rm.tensor(arr).mT * rm.tensor(wt)).pow(2).sum().item())

    x = rm.tensor(a, requires_grad=True)
    (x.mT * rm.tensor(wt)).pow(2).sum().backward()
    assert x.grad is not None
    eps, num = 1e-6, np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[idx] += eps
        down[idx] -= eps
        num[idx] = (f(up) - f(down)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-6, atol=1e-7)


def test_mT_of_a_view_follows_an_in_place_change_of_its_base() -> None:
    base = rm.tensor(np.arange(6.0).reshape(2, 3))
    v = base.mT
    base.add_(1.0)
    np.testing.assert_array_equal(v.numpy(), (np.arange(6.0).reshape(2, 3) + 1).T)
