"""The one-pass avg_pool2d_backward shader (wgpu, non-overlapping windows) against the core's kernel, the float64
reference and torch; the autograd gradient against finite differences; the per-shape choice."""

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
from rumus_contracts.ops.nn_pool import AVG_ATTRS, avg_pool2d_backward_reference, pool_output_shape

DEVICE = rm.default_device()
pytestmark = pytest.mark.skipif(DEVICE.backend != "wgpu", reason="a wgpu kernel (RUMUS_BACKEND=wgpu)")

# non-overlapping windows: gaps between them (stride > kernel), padding, ceil mode, both divisor rules, override
CASES = [((2, 3, 10, 12), {"kernel_size": (2, 2), "stride": (2, 2)}),
         ((2, 2, 11, 10), {"kernel_size": (3, 3), "stride": (3, 3), "padding": (1, 1), "ceil_mode": True}),
         ((2, 2, 11, 10), {"kernel_size": (3, 3), "stride": (3, 3), "padding": (1, 1), "ceil_mode": True,
                           "count_include_pad": False}),
         ((1, 3, 9, 13), {"kernel_size": (2, 3), "stride": (4, 3), "padding": (1, 1)}),
         ((2, 1, 6, 8), {"kernel_size": (2, 2), "stride": (3, 2), "divisor_override": 3})]
IDS = [f"{s}-{a}" for s, a in CASES]


def _kwargs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: attrs[k] for k in ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                  "divisor_override")}


@pytest.mark.parametrize("shape,a", CASES, ids=IDS)
def test_one_pass_equals_core_reference_and_torch(shape: tuple[int, ...], a: dict[str, Any]) -> None:
    attrs = {**AVG_ATTRS, **a}
    rng = np.random.default_rng(0)
    g_host = rng.uniform(-1, 1, pool_output_shape("avg_pool2d", shape, attrs)).astype(np.float32).astype(np.float64)
    g = rm.tensor(g_host, dtype="float32", device=DEVICE)
    battrs = {**attrs, "input_size": shape[2:]}
    chooser = api.kernel("avg_pool2d_backward", api.backend("wgpu"), rm.float32)
    assert isinstance(chooser, ChooseByShape)
    one_pass = chooser.choices[0][1]
    assert chooser.pick([g._arg], battrs) is one_pass
    got = rm.tensor(np.full(shape, np.nan), dtype="float32", device=DEVICE)  # every element must be written
    want = rm.empty(shape, dtype="float32", device=DEVICE)
    one_pass([got._arg], [g._arg], battrs)
    chooser.fallback([want._arg], [g._arg], battrs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    ref = avg_pool2d_backward_reference(g_host, shape[2:], **attrs)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-7)
    tx = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.avg_pool2d(tx, **_kwargs(attrs)).backward(torch.tensor(g_host))
    assert tx.grad is not None
    np.testing.assert_allclose(got.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape,a", CASES[1:4], ids=IDS[1:4])
def test_autograd_matches_finite_differences(shape: tuple[int, ...], a: dict[str, Any]) -> None:
    """avg_pool2d is linear: central differences with a step of 1/4 are exact up to float32 rounding."""
    kw = _kwargs({**AVG_ATTRS, **a})
    rng = np.random.default_rng(1)
    assert_pool_gradient_matches(F.avg_pool2d, kw, rng.uniform(-1, 1, shape), "float32", DEVICE, 0.25, 1e-5, rng,
                                 count=24)


def test_overlapping_windows_keep_the_core_kernel() -> None:
    chooser = api.kernel("avg_pool2d_backward", api.backend("wgpu"), rm.float32)
    assert isinstance(chooser, ChooseByShape)
    args = [TensorArg(None, (8, 64, 28, 28), contiguous_strides((8, 64, 28, 28)), 0, rm.float32)]
    overlapping = {**AVG_ATTRS, "kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "input_size": (56, 56)}
    assert chooser.pick(args, overlapping) is chooser.fallback
    assert chooser.pick(args, {**AVG_ATTRS, "input_size": (56, 56)}) is chooser.choices[0][1]
