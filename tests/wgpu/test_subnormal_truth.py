"""Truth of float32 subnormals on wgpu: a cast to bool and the logical ops test the bits, so a GPU that
flushes subnormals to zero in a float compare (the H200 did) still calls 1e-40 true, as numpy and the CPU do."""

import numpy as np

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

VALUES = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.17e-38, 1.0, np.nan, np.inf], dtype=np.float32)


def test_cast_to_bool() -> None:
    got = rm.tensor(VALUES, device=DEVICE).to(rm.bool).numpy()
    np.testing.assert_array_equal(got, VALUES != 0)


def test_logical_ops() -> None:
    x = rm.tensor(VALUES, device=DEVICE)
    ones = rm.tensor(np.ones_like(VALUES), device=DEVICE)
    np.testing.assert_array_equal(rm.logical_not(x).numpy(), VALUES == 0)
    np.testing.assert_array_equal(rm.logical_and(x, ones).numpy(), VALUES != 0)
    np.testing.assert_array_equal(rm.logical_or(x, 0 * ones).numpy(), VALUES != 0)
