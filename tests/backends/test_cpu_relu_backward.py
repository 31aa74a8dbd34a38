"""ReLU's backward is one fused kernel, relu_backward = where(x > 0, g, 0) (the expression table), not
gt + where: values against float64 numpy on odd and strided shapes, PyTorch's NaN/inf rule (a grad where
x <= 0 gives 0, not 0 * NaN), the in-place form, and the kernel count of a backward pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import _runtime
from rumus.ops import get as op


def _reference(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.where(x.astype(np.float64) > 0, g.astype(np.float64), 0.0)


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (64, 16, 7, 9), (2, 3, 1, 65)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_against_numpy(shape: tuple[int, ...], dtype: Any) -> None:
    rng = np.random.default_rng(len(shape))
    g, x = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    x.flat[0] = 0.0  # the kink: PyTorch's gradient at 0 is 0
    got = op("relu_backward")(rm.tensor(g), rm.tensor(x)).numpy()
    np.testing.assert_array_equal(got, _reference(g, x).astype(dtype))


def test_strided_and_broadcast_operands() -> None:
    rng = np.random.default_rng(1)
    g = rng.standard_normal((9, 14)).astype(np.float32)
    x = rng.standard_normal((14, 9)).astype(np.float32)
    xt = rm.tensor(x).transpose(0, 1)        # a transposed read
    gs = rm.tensor(g)[:, ::2]                # a stepped read
    got = op("relu_backward")(gs, xt[:, ::2]).numpy()
    np.testing.assert_array_equal(got, _reference(g[:, ::2], x.T[:, ::2]).astype(np.float32))
    row = rng.standard_normal(7).astype(np.float32)  # g broadcast over rows
    xb = rng.standard_normal((5, 7)).astype(np.float32)
    got = op("relu_backward")(rm.tensor(row), rm.tensor(xb)).numpy()
    np.testing.assert_array_equal(got, _reference(np.broadcast_to(row, (5, 7)), xb).astype(np.float32))


def test_nan_and_inf_grads_follow_pytorch() -> None:
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, 0.0, 2.0, -3.0, 4.0, 5.0], np.float32)
    g = np.array([np.nan, np.inf, 1.0, -np.inf, np.nan, -2.0], np.float32)
    w = rm.tensor(x, requires_grad=True)
    rm.relu(w).backward(rm.tensor(g))
    tw = torch.tensor(x, requires_grad=True)
    torch.relu(tw).backward(torch.tensor(g))
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())  # NaN where torch has NaN, 0 where it has 0


def test_in_place_relu_keeps_its_gradient() -> None:
    x = np.array([-1.0, 0.0, 2.0, -3.0, 4.0], np.float32)
    w = rm.tensor(x, requires_grad=True)
    h = w * 1.0
    h.relu_()  # the saved input is overwritten by relu's output: the mask x > 0 is the same
    (h * rm.tensor(np.arange(1.0, 6.0, dtype=np.float32))).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.array([0, 0, 3, 0, 5], np.float32))


def test_second_derivative_flows_through_the_grad() -> None:
    w = rm.tensor(np.array([-1.0, 2.0, 3.0], np.float32), requires_grad=True)
    (g,) = rm.autograd.grad((rm.relu(w) * w).sum(), [w], create_graph=True)  # d/dw = 2w where w > 0
    np.testing.assert_array_equal(g.numpy(), np.array([0.0, 4.0, 6.0], np.float32))
    g.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.array([0.0, 2.0, 2.0], np.float32))


def test_backward_runs_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    original = _runtime.kernel

    def counting(name: str, backend: Any, dtype: Any) -> Any:
        inner = original(name, backend, dtype)

        def run(*args: Any) -> Any:
            seen.append(name)
            return inner(*args)
        return run
    monkeypatch.setattr(_runtime, "kernel", counting)
    for name in ("relu_backward", "gt", "where"):  # their cached kernels: looked up afresh, through `counting`
        monkeypatch.setattr(op(name), "_kernels", {})
    w = rm.tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    y = rm.relu(w)
    seen.clear()
    y.backward(rm.ones(4, 5))
    assert seen.count("relu_backward") == 1, seen
    assert "gt" not in seen and "where" not in seen, seen
