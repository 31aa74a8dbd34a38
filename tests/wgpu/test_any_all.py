"""any() / all() on wgpu, which has no uint8: the count behind them runs in int32 on every backend; results
equal numpy's over every dim, keepdim, empty tensors and more true values than a byte holds."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()


@pytest.mark.parametrize("shape", [(3, 4), (300, 2), (0, 3), (5,)])
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_any_all_match_numpy(shape: tuple[int, ...], dim: int | None, keepdim: bool) -> None:
    rng = np.random.default_rng(0)
    x = (rng.random(shape) < 0.3).astype(np.float32)
    x[..., :1] = 1.0 if x.size else x[..., :1]  # columns of all-true values too
    t = rm.tensor(x, device=DEVICE)
    for name in ("any", "all"):
        got = getattr(t, name)(dim, keepdim) if dim is not None else getattr(t, name)()
        want = getattr(np, name)(x != 0, axis=dim, keepdims=keepdim if dim is not None else False)
        assert got.dtype == rm.bool and str(got.device) == DEVICE
        np.testing.assert_array_equal(got.numpy(), want)


def test_more_true_values_than_a_byte_counts() -> None:
    t = rm.ones(256, device=DEVICE) > 0
    assert bool(t.any()) and bool(t.all()) and not bool((~t).any())
