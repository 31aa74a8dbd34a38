"""int32 floor_divide / remainder / fmod on wgpu over every sign combination, against numpy. Vulkan leaves
signed % undefined when an operand is negative: on the H200 (NVIDIA) the old kernels returned the floored
remainder for fmod and off-by-one floor quotients (conformance, session 6). The kernels now divide the
magnitudes as u32 and sign the results themselves; this grid is what the H200 run checks."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

VALUES = np.array([-2**31, -2**31 + 1, -1000003, -65536, -17, -7, -6, -3, -2, -1, 0, 1, 2, 3, 5, 7, 17, 99991,
                   2**31 - 1], dtype=np.int32)
DIVISORS = np.array([-2**31, -1000003, -65536, -7, -3, -2, 1, 2, 3, 7, 10, 65536, 2**31 - 1], dtype=np.int32)


@pytest.mark.parametrize("op,ref", [("floor_divide", np.floor_divide), ("remainder", np.remainder),
                                    ("fmod", np.fmod)])
def test_every_sign_combination_matches_numpy(op: str, ref) -> None:
    a = np.repeat(VALUES, len(DIVISORS))
    b = np.tile(DIVISORS, len(VALUES))
    got = getattr(rm, op)(rm.tensor(a, device=DEVICE), rm.tensor(b, device=DEVICE)).numpy()
    want = ref(a, b)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(int(a[i]), int(b[i]), int(got[i]), int(want[i])) for i in bad[:8]]
