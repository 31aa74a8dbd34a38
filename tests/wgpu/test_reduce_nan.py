"""amax / amin on wgpu propagate NaN as numpy, torch and the CPU kernels do (WGSL's max/min of a NaN is
indeterminate: lavapipe and NVIDIA return the number, which silently dropped the NaN before session 6).
Every reduction path: the row kernel (scalar and vec4 loads, split rows), the column kernel (vec4 and
scalar columns) and the whole-tensor reduction, in each float dtype."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

SHAPES = [(3,), (1000,), (3, 1000), (1000, 3), (512, 300), (70000, 4), (4, 70000), (2, 3, 5000)]


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_nan_propagates(shape: tuple[int, ...], dtype: str, op: str) -> None:
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[int(rng.integers(x.size))] = np.nan
    t = rm.tensor(x, device=DEVICE).to(getattr(rm, dtype))
    host = t.float().numpy()
    for dim in range(len(shape)):
        got = getattr(t, op)(dim).float().numpy()
        want = getattr(np, op)(host, axis=dim)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"dim {dim}")
        np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)], err_msg=f"dim {dim}")
    assert np.isnan(getattr(t, op)().float().item())
