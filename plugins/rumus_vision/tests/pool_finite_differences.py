"""Central finite differences at a few random elements, shared by the pooling kernels' gradient tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def assert_gradient_matches(loss: Callable[[np.ndarray], float], x0: np.ndarray, grad: np.ndarray, eps: float,
                            rtol: float, rng: np.random.Generator, count: int = 16) -> None:
    """grad (the autograd gradient of loss at x0) against (loss(x0 + eps e) - loss(x0 - eps e)) / 2 eps at `count`
    random elements e, within rtol * max(1, |fd|)."""
    for flat in rng.choice(x0.size, size=count, replace=False):
        idx = np.unravel_index(flat, x0.shape)
        up, down = x0.copy(), x0.copy()
        up[idx] += eps
        down[idx] -= eps
        fd = (loss(up) - loss(down)) / (2 * eps)
        assert abs(fd - grad[idx]) <= rtol * max(1.0, abs(fd)), (idx, fd, grad[idx])
