"""The row-wise avg_pool2d kernels (cpu, forward and backward) against the core's kernels, the float64
references and torch; gradients against finite differences; the per-shape choice."""

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
from rumus_contracts.ops.nn_pool import (AVG_ATTRS, avg_pool2d_backward_reference, avg_pool2d_reference,
                                         pool_output_shape)

pytestmark = pytest.mark.skipif(rm.default_device().backend != "cpu", reason="cpu kernels")

# every case has output rows >= 8 wide (the plugin's kernels run): padding, ceil mode, count_include_pad,
# divisor_override, overlapping and non-square windows
CASES = [((2, 3, 10, 20), {"kernel_size": (2, 2), "stride": (2, 2)}),
         ((2, 2, 11, 19), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
         ((1, 3, 9, 17), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True,
                          "count_include_pad": False}),
         ((2, 2, 7, 12), {"kernel_size": (3, 2), "stride": (1, 1), "padding": (1, 1)}),
         ((1, 2, 8, 13), {"kernel_size": (2, 3), "stride": (2, 1), "divisor_override": 5}),
         ((1, 1, 9, 16), {"kernel_size": (5, 5), "stride": (1, 2), "padding": (2, 2), "ceil_mode": True})]
IDS = [f"{s}-{a}" for s, a in CASES]


def _kernels(op: str, dtype: Any) -> tuple[Any, Any]:
    chooser = api.kernel(op, api.backend("cpu"), dtype)
    assert isinstance(chooser, ChooseByShape)
    return chooser.fallback, chooser.choices[0][1]


def _torch_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: attrs[k] for k in ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                  "divisor_override")}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,a", CASES, ids=IDS)
def test_forward_equals_core_reference_and_torch(shape: tuple[int, ...], a: dict[str, Any], dtype: str) -> None:
    attrs = {**AVG_ATTRS, **a}
    host = np.random.default_rng(0).uniform(-2, 2, shape)
    x = rm.tensor(host, dtype=dtype)
    core, rows = _kernels("avg_pool2d", getattr(rm, dtype))
    out_shape = pool_output_shape("avg_pool2d", shape, attrs)
    assert api.kernel("avg_pool2d", api.backend("cpu"), getattr(rm, dtype)).pick([x._arg], attrs) is rows
    got, want = rm.empty(out_shape, dtype=dtype), rm.empty(out_shape, dtype=dtype)
    rows([got._arg], [x._arg], attrs)
    core([want._arg], [x._arg], attrs)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(got.numpy(), avg_pool2d_reference(host, **attrs), rtol=tol, atol=tol)
    tx = torch.nn.functional.avg_pool2d(torch.tensor(host), **_torch_attrs(attrs))
    np.testing.assert_allclose(got.numpy(), tx.numpy(), rtol=tol, atol=tol)
    # the public function dispatches to the plugin's kernel and agrees too
    np.testing.assert_allclose(F.avg_pool2d(x, **_torch_attrs(attrs)).numpy(), got.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,a", CASES, ids=IDS)
def test_backward_equals_core_reference_and_torch(shape: tuple[int, ...], a: dict[str, Any], dtype: str) -> None:
    attrs = {**AVG_ATTRS, **a}
    rng = np.random.default_rng(1)
    host = rng.uniform(-2, 2, shape)
    gy_host = rng.uniform(-1, 1, pool_output_shape("avg_pool2d", shape, attrs))
    gy = rm.tensor(gy_host, dtype=dtype)
    battrs = {**attrs, "input_size": shape[2:]}
    core, rows = _kernels("avg_pool2d_backward", getattr(rm, dtype))
    assert api.kernel("avg_pool2d_backward", api.backend("cpu"), getattr(rm, dtype)).pick([gy._arg], battrs) is rows
    got = rm.tensor(np.full(shape, np.nan), dtype=dtype)  # the kernel must write every element
    want = rm.empty(shape, dtype=dtype)
    rows([got._arg], [gy._arg], battrs)
    core([want._arg], [gy._arg], battrs)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(got.numpy(), avg_pool2d_backward_reference(gy_host, shape[2:], **attrs), rtol=tol,
                               atol=tol)
    tx = torch.tensor(host, requires_grad=True)
    torch.nn.functional.avg_pool2d(tx, **_torch_attrs(attrs)).backward(torch.tensor(gy_host))
    assert tx.grad is not None
    np.testing.assert_allclose(got.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,a", CASES[1:4], ids=IDS[1:4])
def test_gradient_matches_finite_differences(shape: tuple[int, ...], a: dict[str, Any]) -> None:
    attrs = _torch_attrs({**AVG_ATTRS, **a})
    rng = np.random.default_rng(2)
    assert_pool_gradient_matches(F.avg_pool2d, attrs, rng.uniform(-1, 1, shape), "float64", None, 1e-6, 1e-7, rng)


def _args(*shapes: tuple[int, ...]) -> list[TensorArg]:
    return [TensorArg(None, s, contiguous_strides(s), 0, rm.float32) for s in shapes]


def test_narrow_outputs_keep_the_core_kernels() -> None:
    """Output rows narrower than 8 (the global 7x7 pool of ResNet-like heads, 2x2 pools of small maps): the core's."""
    fwd = api.kernel("avg_pool2d", api.backend("cpu"), rm.float32)
    bwd = api.kernel("avg_pool2d_backward", api.backend("cpu"), rm.float32)
    assert isinstance(fwd, ChooseByShape) and isinstance(bwd, ChooseByShape)
    head = {**AVG_ATTRS, "kernel_size": (7, 7), "stride": (7, 7)}
    assert fwd.pick(_args((64, 512, 7, 7)), head) is fwd.fallback
    assert bwd.pick(_args((64, 512, 1, 1)), {**head, "input_size": (7, 7)}) is bwd.fallback
    assert fwd.pick(_args((8, 64, 56, 56)), dict(AVG_ATTRS)) is fwd.choices[0][1]
    assert bwd.pick(_args((8, 64, 28, 28)), {**AVG_ATTRS, "input_size": (56, 56)}) is bwd.choices[0][1]
