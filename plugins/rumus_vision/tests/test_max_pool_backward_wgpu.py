"""The one-pass max_pool2d_backward shader (wgpu, non-overlapping windows) against the core's two-pass kernel,
the float64 reference and torch; the autograd gradient against finite differences; the per-shape choice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm
from rumus import backend_api as api
from rumus.nn import functional as F
from rumus_contracts import ChooseByShape, TensorArg, contiguous_strides
from pool_finite_differences import assert_pool_gradient_matches
from rumus_contracts.ops.nn_pool import MAX_ATTRS, max_pool2d_backward_reference, pool_output_shape

DEVICE = rm.default_device()
pytestmark = pytest.mark.skipif(DEVICE.backend != "wgpu", reason="a wgpu kernel (RUMUS_BACKEND=wgpu)")

CASES = [((2, 3, 10, 12), {"kernel_size": (2, 2), "stride": (2, 2)}),
         ((2, 2, 11, 10), {"kernel_size": (3, 3), "stride": (3, 3), "padding": (1, 1), "ceil_mode": True}),
         ((1, 3, 9, 13), {"kernel_size": (2, 3), "stride": (4, 3), "dilation": (2, 1), "padding": (1, 1)}),
         ((2, 1, 5, 7), {"kernel_size": (2, 2), "stride": (2, 2), "ceil_mode": True})]
IDS = [f"{s}-{a}" for s, a in CASES]


def _distinct(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    out: np.ndarray = (rng.permutation(n).astype(np.float64) / 4.0 - n / 8.0).reshape(shape)
    return out


def _kwargs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: attrs[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")}


@pytest.mark.parametrize("shape,a", CASES, ids=IDS)
def test_one_pass_equals_core_reference_and_torch(shape: tuple[int, ...], a: dict[str, Any]) -> None:
    attrs = {**MAX_ATTRS, **a}
    rng = np.random.default_rng(0)
    x_host = _distinct(rng, shape)
    g_host = rng.uniform(-1, 1, pool_output_shape("max_pool2d", shape, attrs))
    x, g = rm.tensor(x_host, dtype="float32", device=DEVICE), rm.tensor(g_host, dtype="float32", device=DEVICE)
    chooser = api.kernel("max_pool2d_backward", api.backend("wgpu"), rm.float32)
    assert isinstance(chooser, ChooseByShape)
    one_pass = chooser.choices[0][1]
    assert chooser.pick([g._arg, x._arg], attrs) is one_pass
    got = rm.tensor(np.full(shape, np.nan), dtype="float32", device=DEVICE)  # every element must be written
    want = rm.empty(shape, dtype="float32", device=DEVICE)
    one_pass([got._arg], [g._arg, x._arg], attrs)
    chooser.fallback([want._arg], [g._arg, x._arg], attrs)
    np.testing.assert_array_equal(got.numpy(), want.numpy())  # one window per element: no rounding to differ
    ref = max_pool2d_backward_reference(g_host.astype(np.float32).astype(np.float64), x_host, **attrs)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-7)
    tx = torch.tensor(x_host, requires_grad=True)
    torch.nn.functional.max_pool2d(tx, **_kwargs(attrs)).backward(torch.tensor(g_host))
    assert tx.grad is not None
    np.testing.assert_allclose(got.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape,a", CASES[:3], ids=IDS[:3])
def test_autograd_matches_finite_differences(shape: tuple[int, ...], a: dict[str, Any]) -> None:
    """max_pool2d is linear between ties: values 0.25 apart and a step of 1/64 never move a maximum, so central
    differences are exact up to float32 rounding."""
    kw = _kwargs({**MAX_ATTRS, **a})
    rng = np.random.default_rng(1)
    assert_pool_gradient_matches(F.max_pool2d, kw, _distinct(rng, shape), "float32", DEVICE, 1.0 / 64, 1e-5, rng,
                                 count=24)


def test_overlapping_windows_keep_the_core_kernel() -> None:
    chooser = api.kernel("max_pool2d_backward", api.backend("wgpu"), rm.float32)
    assert isinstance(chooser, ChooseByShape)
    shapes = [(8, 64, 56, 56), (8, 64, 112, 112)]
    args = [TensorArg(None, s, contiguous_strides(s), 0, rm.float32) for s in shapes]
    stem = {**MAX_ATTRS, "kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}
    assert chooser.pick(args, stem) is chooser.fallback
    assert chooser.pick(args, {**MAX_ATTRS, "kernel_size": (2, 2), "stride": (2, 2), "dilation": (2, 2)}) \
        is chooser.fallback
    assert chooser.pick(args, dict(MAX_ATTRS)) is chooser.choices[0][1]
