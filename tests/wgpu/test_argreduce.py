"""argmax / argmin on wgpu (reduce.wgsl with a (value, index) accumulator) against numpy: the first index
on ties, NaN as the best value of both ops (the first NaN wins), rows within one group, across a whole
workgroup and strided (an outer dim), for float32, float16 and both integer widths."""

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
CASES = [((7,), 0), ((3, 1000), 1), ((1000, 3), 0), ((5, 300, 2), 1), ((2, 70000), 1)]


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
@pytest.mark.parametrize(("shape", "dim"), CASES)
def test_matches_numpy_with_ties_and_nans(op: str, dtype: str, shape: tuple[int, ...], dim: int) -> None:
    rng = np.random.default_rng(len(shape) * 7 + shape[0])
    a = rng.integers(-3, 3, shape).astype(dtype)  # few distinct values: many ties
    if dtype.startswith("float"):
        a.flat[5] = a.flat[a.size // 2] = np.nan  # two NaNs in the first row: the first one wins
    got = getattr(rm, op)(rm.tensor(a, device=DEVICE), dim=dim).numpy()
    np.testing.assert_array_equal(got, getattr(np, op)(a, axis=dim))
