"""The row-wise max_pool2d kernel (cpu) against the core's kernel and the float64 reference: bit-equal values,
PyTorch's NaN rule, the per-shape choice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import backend_api as api
from rumus_contracts import ChooseByShape, TensorArg, contiguous_strides
from rumus_contracts.ops.nn_pool import MAX_ATTRS, max_pool2d_reference

pytestmark = pytest.mark.skipif(rm.default_device().backend != "cpu", reason="a cpu kernel")

CASES = [((2, 3, 13, 12), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
         ((1, 4, 9, 11), {"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 1), "dilation": (2, 1)}),
         ((2, 2, 8, 7), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True})]


def _core_and_rows(attrs: dict[str, Any]) -> tuple[Any, Any]:
    chooser = api.kernel("max_pool2d", api.backend("cpu"), rm.float64)
    assert isinstance(chooser, ChooseByShape)
    return chooser.fallback, chooser.choices[0][1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,a", CASES)
def test_rows_kernel_equals_core_and_reference(shape: tuple[int, ...], a: dict[str, Any], dtype: str) -> None:
    attrs = {**MAX_ATTRS, **a}
    host = np.random.default_rng(0).standard_normal(shape)
    host.reshape(-1)[::7] = np.nan  # NaN wins its windows
    host.reshape(-1)[3::11] = -np.inf
    x = rm.tensor(host, dtype=dtype)
    got = rm.ops.max_pool2d(x, **attrs)  # padded windows: the plugin's kernel
    core, rows = _core_and_rows(attrs)
    want = rm.empty(got.shape, dtype=dtype)
    core([want._arg], [x._arg], attrs)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(got.numpy(), max_pool2d_reference(host.astype(dtype), **attrs).astype(dtype))


def test_only_padded_windows_take_the_rows_kernel() -> None:
    core, rows = _core_and_rows({})
    chooser = api.kernel("max_pool2d", api.backend("cpu"), rm.float32)
    x = [TensorArg(None, (8, 64, 112, 112), contiguous_strides((8, 64, 112, 112)), 0, rm.float32)]
    stem = {**MAX_ATTRS, "kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}
    assert chooser.pick(x, stem) is chooser.choices[0][1]
    assert chooser.pick(x, dict(MAX_ATTRS)) is chooser.fallback  # 2x2 / stride 2: the core's fast path
