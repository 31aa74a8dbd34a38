"""Issue 20 items 7-9 and 11 (casts) as plain regression tests, on the CPU and (when an adapter exists)
the WebGPU backend, each against PyTorch or the documented rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from backends_under_test import devices

import rumus as rm
import rumus.nn.functional as F
from rumus_contracts import IndexOutOfRange

torch = pytest.importorskip("torch")


DEVICES = devices()
INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("device", DEVICES)
def test_logsumexp_of_infinities_as_pytorch(device: str) -> None:
    rows = [[-INF, -INF], [INF, 0.0], [INF, INF], [INF, -INF], [NAN, 1.0], [-INF, 3.0], [1.0, 2.0]]
    got = rm.logsumexp(rm.tensor(rows, device=device), 1).numpy()
    want = torch.logsumexp(torch.tensor(rows), 1).numpy()
    assert got[0] == -INF and got[1] == INF and got[2] == INF and got[3] == INF and np.isnan(got[4])
    np.testing.assert_allclose(got, want, rtol=1e-6)  # equal infinities and NaNs count as equal


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rows_with_infinities_as_pytorch(device: str, op: str) -> None:
    rows = [[INF, 0.0, 1.0], [-INF, -INF, -INF], [-INF, 0.0, 1.0], [INF, INF, 0.0], [NAN, 0.0, 1.0], [1e30, 0, -1e30]]
    got = getattr(rm, op)(rm.tensor(rows, device=device), 1).numpy()
    want = getattr(torch, op)(torch.tensor(rows), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_one_hot_refuses_classes_out_of_range(device: str) -> None:
    with pytest.raises(IndexError, match="non-negative"):
        F.one_hot(rm.tensor([5, -1, 1], device=device), num_classes=3)
    with pytest.raises(IndexOutOfRange, match="class value 5 is out of range for num_classes=3"):
        F.one_hot(rm.tensor([5, 0, 1], device=device), num_classes=3)
    with pytest.raises(RuntimeError):  # what PyTorch raises
        F.one_hot(rm.tensor([3], device=device), num_classes=3)
    np.testing.assert_array_equal(F.one_hot(rm.tensor([2, 0], device=device), 3).numpy(), [[0, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", [1e4, 1e6, -3e7])
def test_batch_norm_of_a_constant_is_exactly_zero(device: str, offset: float) -> None:
    """Issue 20: constant 1e4 gave -0.25 and 1e6 gave -32 (PyTorch float32 itself gives 8.7 at 1e6)."""
    x = rm.full((16, 3, 4), offset, device=device, requires_grad=True)
    w, b = rm.tensor([1.0, 2.0, -1.0], device=device), rm.tensor([0.5, 0.0, -2.0], device=device)
    y = F.batch_norm(x, rm.zeros(3, device=device), rm.ones(3, device=device), w, b, training=True)
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(np.array([0.5, 0.0, -2.0])[:, None], (16, 3, 4)))
    g = np.random.default_rng(0).standard_normal((16, 3, 4)).astype(np.float32)
    (y * rm.tensor(g, device=device)).sum().backward()
    xt = torch.full((16, 3, 4), offset, dtype=torch.float64, requires_grad=True)
    yt = torch.nn.functional.batch_norm(xt, None, None, torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64),
                                        torch.tensor([0.5, 0.0, -2.0], dtype=torch.float64), training=True)
    (yt * torch.tensor(g, dtype=torch.float64)).sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_float_to_int_casts_follow_the_documented_rule(device: str) -> None:
    values = [NAN, INF, -INF, 1e10, -1e10, 2147483648.0, -2147483648.0, 2.9, -2.9, -0.0]
    x = rm.tensor(values, dtype=rm.float32, device=device)
    assert x.to(rm.int32).numpy().tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 0]
    assert x.to(rm.int64).numpy().tolist() == [0, 2**63 - 1, -2**63, 10**10, -10**10, 2**31, -2**31, 2, -2, 0]
    assert x.to(rm.bool).numpy().tolist() == [True] * 9 + [False]
    if device == "cpu":
        assert rm.tensor([300.0, -300.0, NAN, -1.0], device=device).to(rm.int8).numpy().tolist() == [127, -128, 0, -1]
        assert rm.tensor([300.0, -1.0, NAN, 2.5]).to(rm.uint8).numpy().tolist() == [255, 0, 0, 2]
    else:  # no int8 storage on this backend: a clear error, never a KeyError
        with pytest.raises(rm.DTypeError, match="no kernels for rumus.int8"):
            x.to(rm.int8)
