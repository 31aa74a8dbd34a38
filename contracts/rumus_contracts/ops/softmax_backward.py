"""Fused backward ops of softmax and log_softmax: one row pass for the sum, one for the gradient.

    softmax_backward(grad, y, dim)      = y * (grad - sum(grad * y, dim))     (y = softmax(x, dim))
    log_softmax_backward(grad, y, dim)  = grad - exp(y) * sum(grad, dim)      (y = log_softmax(x, dim))

The core's softmax / log_softmax formulas call them when the backend has a kernel and no graph of the
backward is being built (they are not differentiable themselves); otherwise the same expressions run
as separate ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from .reduction import _check_dims, _log_softmax, _softmax

CASES = (((3, 4), 1), ((3, 4), 0), ((2, 3, 5), 1), ((7,), 0), ((2, 0, 3), 2), ((4, 1), 1), ((2, 65), 1),
         ((3, 257), 1), ((5, 2, 6), 0))


def _shape(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        g, y = (tuple(s) for s in shapes)
        if g != y:
            raise ShapeError(f"{op}: grad {g} and output {y} differ in shape (pass the forward's output and "
                             f"the gradient of the same shape)")
        if g:
            _check_dims(op, g, (attrs["dim"],))
        return [g]
    return rule


def softmax_backward_reference(g: np.ndarray, y: np.ndarray, dim: int = 0) -> Any:
    if not g.shape:
        return np.zeros_like(g)
    return y * (g - (g * y).sum(axis=dim, keepdims=True))


def log_softmax_backward_reference(g: np.ndarray, y: np.ndarray, dim: int = 0) -> Any:
    if not g.shape:
        return np.zeros_like(g)
    return g - np.exp(y) * g.sum(axis=dim, keepdims=True)


def _samples(forward: Any) -> Any:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([rng.uniform(-2, 2, s), forward(rng.uniform(-4, 4, s), d)], {"dim": d}, name=f"{s}/{d}")
                for s, d in CASES]
    return gen


def _errors(op: str) -> Any:
    def gen() -> list[ErrorSample]:
        return [ErrorSample([np.zeros((2, 3)), np.zeros((2, 4))], {"dim": 1}, ShapeError, "differ in shape"),
                ErrorSample([np.zeros((2, 3)), np.zeros((2, 3))], {"dim": 2}, ShapeError, "within")]
    return gen


def register(registry: OpRegistry) -> None:
    for name, ref, forward in (("softmax_backward", softmax_backward_reference, _softmax),
                               ("log_softmax_backward", log_softmax_backward_reference, _log_softmax)):
        registry.register(OpSchema(
            name, ("grad", "y"), _shape(name), attrs={"dim": 0}, contiguous=("grad", "y"), reference=ref,
            samples=_samples(forward), error_samples=_errors(name),
            doc=f"the gradient of {name.removesuffix('_backward')} from its output y, fused (two row passes)"))
