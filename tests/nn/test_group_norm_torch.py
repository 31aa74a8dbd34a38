"""group_norm forward and its gradients (x, weight, bias) against torch.nn.functional.group_norm in float64,
on every device: several shapes (G dividing C, C = G, G = 1, spatial 1), a zero-size batch, constant input
(variance 0: the output is the bias), offset data (mean 1e4, std 1: two-pass statistics), and a float64
finite-difference check of the gradients on the CPU. Both backends render group norm from the row-op table
(rumus_contracts/ops/row_ops.py: grouped columns)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rumus as rm
from backends_under_test import devices
from rumus.nn import functional as F

SHAPES = [((2, 6, 3, 4), 3), ((3, 4, 5, 1), 4), ((2, 8, 2, 2), 1), ((4, 6, 1, 1), 2), ((2, 3, 7, 5), 3),
          ((1, 12, 4), 4), ((5, 4, 33), 2), ((2, 8, 16, 16), 4)]


def _f64(t: rm.Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _both(x: np.ndarray, g: np.ndarray, groups: int, device: str, dtype: str = "float32",
          seed: int = 3) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(rumus's y, dx, dw, db at `dtype` on `device`, torch's in float64 from the same stored values)."""
    rng = np.random.default_rng(seed)
    c = x.shape[1]
    w, b = rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c)
    xr, wr, br = (rm.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in (x, w, b))
    y = F.group_norm(xr, groups, wr, br)
    y.backward(rm.tensor(g, dtype=dtype, device=device))
    xt, wt, bt = (torch.tensor(_f64(a), requires_grad=True) for a in (xr, wr, br))
    yt = torch.nn.functional.group_norm(xt, groups, wt, bt)
    yt.backward(torch.tensor(rm.tensor(g, dtype=dtype).double().numpy()))
    got = [_f64(a) for a in (y, xr.grad, wr.grad, br.grad)]
    want = [a.detach().numpy() for a in (yt, xt.grad, wt.grad, bt.grad)]
    return got, want


def _close(got: list[np.ndarray], want: list[np.ndarray], tol: float) -> None:
    for name, a, b in zip(("y", "dx", "dw", "db"), got, want):
        # the weight gradients sum over N * S elements: their scale grows with it
        scale = max(1.0, float(np.abs(b).max())) if b.size else 1.0
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, err_msg=name)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("shape,groups", SHAPES)
def test_matches_torch(device: str, shape: tuple[int, ...], groups: int) -> None:
    rng = np.random.default_rng(sum(shape) + groups)
    x = rng.standard_normal(shape) * 2 + 0.5
    got, want = _both(x, rng.standard_normal(shape), groups, device)
    _close(got, want, 1e-5 if device == "cpu" else 2e-5)


@pytest.mark.parametrize("device", devices())
def test_zero_batch(device: str) -> None:
    got, want = _both(np.zeros((0, 4, 3, 3)), np.zeros((0, 4, 3, 3)), 2, device)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", devices())
def test_constant_input_gives_the_bias(device: str) -> None:
    shape = (3, 6, 4, 5)
    x = np.full(shape, 3.25)
    rng = np.random.default_rng(8)
    got, want = _both(x, rng.standard_normal(shape), 3, device)
    rng = np.random.default_rng(3)  # _both's weight and bias
    rng.uniform(0.5, 1.5, 6)
    b = rng.uniform(-1, 1, 6).astype(np.float32).astype(np.float64)  # the bias as stored
    np.testing.assert_allclose(got[0], np.broadcast_to(b[None, :, None, None], shape), rtol=0,
                               atol=0 if device == "cpu" else 1e-6)
    _close(got, want, 1e-5)


@pytest.mark.parametrize("device", devices())
def test_offset_data_keeps_its_digits(device: str) -> None:
    # mean 1e4, std 1: E[x^2] - E[x]^2 would lose about 8 digits of the variance in float32 (and ~0 in f64)
    rng = np.random.default_rng(9)
    shape = (2, 8, 6, 6)
    x = rng.standard_normal(shape) + 1e4
    got, want = _both(x, rng.standard_normal(shape), 4, device)
    _close(got, want, 1e-3 if device != "cpu" else 2e-4)  # x itself is float32: ~1e-3 of its spread


@pytest.mark.parametrize("shape,groups", [((2, 6, 2, 3), 3), ((3, 4, 1), 1), ((2, 4, 5), 4)])
def test_finite_differences_float64(shape: tuple[int, ...], groups: int) -> None:
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal(shape), rng.uniform(0.5, 1.5, shape[1]), rng.standard_normal(shape[1])
    g = rng.standard_normal(shape)
    xr, wr, br = (rm.tensor(a, dtype="float64", requires_grad=True) for a in (x, w, b))
    F.group_norm(xr, groups, wr, br).backward(rm.tensor(g, dtype="float64"))

    def loss(xa: np.ndarray, wa: np.ndarray, ba: np.ndarray) -> float:
        y = F.group_norm(rm.tensor(xa, dtype="float64"), groups, rm.tensor(wa, dtype="float64"),
                         rm.tensor(ba, dtype="float64"))
        return float((y.numpy() * g).sum())
    h = 1e-6
    for k, (arr, grad) in enumerate(((x, xr.grad), (w, wr.grad), (b, br.grad))):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            args = [x, w, b]
            up, down = arr.copy(), arr.copy()
            up[i] += h
            down[i] -= h
            args[k] = up
            fu = loss(*args)
            args[k] = down
            num[i] = (fu - loss(*args)) / (2 * h)
        np.testing.assert_allclose(grad.numpy(), num, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_storage(device: str, dtype: str) -> None:
    if device != "cpu" and dtype == "bfloat16":
        pytest.skip("bfloat16 group norm is a CPU dtype")
    rng = np.random.default_rng(12)
    shape = (3, 8, 5, 5)
    x = rng.standard_normal(shape) * 2 + 3
    got, want = _both(x, rng.standard_normal(shape), 4, device, dtype)
    _close(got, want, {"float16": 4e-3, "bfloat16": 3e-2}[dtype])  # one rounding of each result


def test_cpu_kernels_are_row_ops() -> None:
    from rumus_cpu import kernels_row_ops

    names = {name for name, _, _ in kernels_row_ops.KERNELS}
    assert {"group_norm", "group_norm_backward"} <= names
