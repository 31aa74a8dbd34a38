"""Autograd engine: accumulation, retain_graph, grad(), version checks, grad modes."""

import numpy as np
import pytest

import rumus as rm
from rumus import AutogradError


def test_gradient_accumulates_on_leaves_and_unbroadcasts():
    a = rm.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = rm.tensor([10.0, 20.0, 30.0], requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.array([[10, 20, 30], [10, 20, 30]]))
    np.testing.assert_allclose(b.grad.numpy(), np.array([5, 7, 9]))
    (a * b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.array([10, 14, 18]))


def test_shared_subexpression_uses_dependency_counts():
    x = rm.tensor(3.0, requires_grad=True)
    y = x * x
    z = y * y + y  # x^4 + x^2
    z.backward()
    assert x.grad.item() == pytest.approx(4 * 27 + 2 * 3)


def test_backward_twice_without_retain_graph_says_so():
    x = rm.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(AutogradError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = rm.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_backward_on_non_scalar_needs_gradient():
    x = rm.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AutogradError, match="scalar outputs"):
        (x * 2).backward()


def test_autograd_grad_returns_without_touching_dot_grad():
    x = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x.exp()).sum()
    (g,) = rm.autograd.grad(y, [x])
    np.testing.assert_allclose(g.numpy(), np.exp([1.0, 2.0, 3.0]), rtol=1e-6)
    assert x.grad is None


def test_inplace_modification_of_saved_tensor_raises():
    a = rm.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    c = b * b  # saves b
    with rm.no_grad():
        b.add_(1.0)
    with pytest.raises(AutogradError, match="modified by an in-place operation"):
        c.sum().backward()


def test_inplace_on_leaf_requiring_grad_is_refused():
    a = rm.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AutogradError, match="leaf"):
        a.add_(1.0)


def test_inplace_rebase_keeps_correct_gradient():
    a = rm.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2.0
    b.add_(3.0)
    b.mul_(2.0)  # (2a+3)*2: mul by a constant needs no saved self
    (b * b).sum().backward()  # d/da (4a+6)^2 = 8(4a+6)
    np.testing.assert_allclose(a.grad.numpy(), [80.0, 112.0])


def test_no_grad_and_inference_mode_record_nothing():
    x = rm.ones(3, requires_grad=True)
    with rm.no_grad():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad
    with rm.inference_mode():
        z = x.exp()
    assert z.grad_fn is None
    assert rm.is_grad_enabled()


def test_views_keep_autograd():
    x = rm.arange(12, dtype="float32").reshape(3, 4).requires_grad_()
    y = x.T[1:, ::2].reshape(-1)
    (y * rm.arange(6, dtype="float32")).sum().backward()
    expected = np.zeros((3, 4))
    xt = expected.T
    xt[1:, ::2].reshape(-1)  # layout reference only
    ref = np.zeros((4, 3))
    ref[1:, ::2] = np.arange(6).reshape(3, 2)
    np.testing.assert_allclose(x.grad.numpy(), ref.T)


def test_expand_chunk_split_narrow_gradients():
    x = rm.tensor([[1.0], [2.0]], requires_grad=True)
    e = x.expand(2, 3)
    a, b = e.chunk(2, dim=1)
    (a.sum() * 2 + b.sum() + e.narrow(1, 0, 1).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2 * 2 + 1 + 1], [2 * 2 + 1 + 1]])


def test_cat_stack_gradients():
    a = rm.tensor([1.0, 2.0], requires_grad=True)
    b = rm.tensor([3.0], requires_grad=True)
    c = rm.cat([a, b])
    (c * rm.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(b.grad.numpy(), [3.0])
    s = rm.stack([a, a], dim=1)
    assert s.shape == (2, 2)


def test_custom_function():
    class Cube(rm.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    x = rm.tensor([2.0], requires_grad=True)
    Cube.apply(x).sum().backward()
    assert x.grad.item() == pytest.approx(12.0)


def test_max_with_dim_returns_values_and_indices():
    x = rm.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    values, indices = x.max(dim=1)
    assert indices.tolist() == [1, 0]
    values.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 1, 0], [1, 0, 0]])
