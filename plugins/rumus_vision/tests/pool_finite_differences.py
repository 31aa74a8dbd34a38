"""Central finite differences at a few random elements, shared by the pooling kernels' gradient tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import rumus as rm


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


def assert_pool_gradient_matches(pool: Callable[..., Any], kwargs: dict[str, Any], x0: np.ndarray, dtype: str,
                                 device: Any, eps: float, rtol: float, rng: np.random.Generator,
                                 count: int = 16) -> None:
    """The autograd gradient of sum(pool(x, **kwargs) * gy) at x0 (a rumus tensor of `dtype` on `device`; gy
    uniform in [-1, 1), drawn from rng) against central differences of the same loss (see assert_gradient_matches)."""
    with rm.no_grad():
        gy = rng.uniform(-1, 1, pool(rm.tensor(x0, dtype=dtype, device=device), **kwargs).shape)

    def loss(xv: np.ndarray) -> float:
        with rm.no_grad():
            y = pool(rm.tensor(xv, dtype=dtype, device=device), **kwargs).numpy().astype(np.float64)
        return float((y * gy).sum())

    x = rm.tensor(x0, dtype=dtype, device=device, requires_grad=True)
    (pool(x, **kwargs) * rm.tensor(gy, dtype=dtype, device=device)).sum().backward()
    assert x.grad is not None
    assert_gradient_matches(loss, x0, x.grad.numpy(), eps, rtol, rng, count)
