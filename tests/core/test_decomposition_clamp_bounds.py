"""clamp's decomposition on integer tensors with bounds outside the dtype's range matches the cpu kernel (a
bound must clip to the range: wrapped, -1 on uint8 would become 255 and clamp everything)."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus._dispatch import DECOMPOSITIONS


@pytest.mark.parametrize("dtype, values, lo, hi", [
    (rm.uint8, [0, 5, 200, 255], -1.0, 1.0), (rm.uint8, [0, 5, 200], 3.0, 1000.0),
    (rm.int8, [-128, -5, 0, 7, 127], -300.0, 3.0), (rm.int32, [-7, 0, 9], -2.5, 2.5),
    (rm.int64, [-(2 ** 40), 0, 2 ** 40], -1e30, 1e30),
])
def test_integer_clamp_with_out_of_range_bounds(dtype: rm.DType, values: list[int], lo: float, hi: float) -> None:
    x = rm.tensor(np.array(values), dtype=dtype)
    got = DECOMPOSITIONS["clamp"](x, min=lo, max=hi)
    want = rm.ops.get("clamp")(x, min=lo, max=hi)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
