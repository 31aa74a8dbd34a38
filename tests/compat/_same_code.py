"""Run one call the same way under torch and under rumus and compare values and gradients: the harness of the
test_*_vs_torch / test_torch_* files (each names its cases as (input arrays, call(lib, *tensors)))."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

Case = tuple[list[np.ndarray], Callable[..., Any]]


def run(lib: ModuleType, case: Case, dtype: str) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """The call's output and the gradients of a fixed weighting of its finite elements for every input."""
    arrays, call = case
    ts = [lib.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    out = call(lib, *ts)
    weights = np.cos(np.arange(int(np.prod(tuple(out.shape))) or 1)).reshape(tuple(out.shape)).astype(dtype)
    finite = lib.where(lib.isfinite(out), out, lib.zeros_like(out))
    (finite * lib.tensor(weights)).sum().backward()
    return out.detach().numpy(), [None if t.grad is None else t.grad.numpy() for t in ts]


def assert_matches_torch(torch: ModuleType, rumus: ModuleType, case: Case, dtype: str,
                         tolerances: dict[str, tuple[float, float]]) -> None:
    """rumus's values within tolerances[dtype] of torch's, its gradients within ten times that."""
    want, want_grads = run(torch, case, dtype)
    got, got_grads = run(rumus, case, dtype)
    rtol, atol = tolerances[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=rtol * 10, atol=atol * 10)
