"""The op's contract: shape and dtype rules, reference, samples and backward."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import OpSchema, Sample, float32, float64


def reference(x: np.ndarray, beta: float = 1.0) -> np.ndarray:
    return x / (1.0 + np.exp(-beta * x))


def samples(rng: np.random.Generator) -> list[Sample]:
    shapes = [(3, 4), (), (1,), (0, 2), (5, 7, 3), (300,)]
    return [Sample([rng.uniform(-4, 4, s)], {"beta": b}, name=f"{s}/b{b}") for s in shapes for b in (1.0, 0.5)]


def backward(ctx: Any, g: Any) -> tuple[Any]:
    """d/dx x*s(bx) = s(bx) + b*x*s(bx)*(1-s(bx)), written with rumus ops (runs on any backend)."""
    import rumus as rm
    (x,) = ctx.inputs
    beta = ctx.attrs["beta"]
    s = rm.sigmoid(x * beta)
    return (g * (s + x * beta * s * (1.0 - s)),)


SWISH = OpSchema(
    "hello_swish", ("x",), lambda shapes, attrs: [tuple(shapes[0])], attrs={"beta": 1.0},
    dtypes=(float32, float64), differentiable=("x",), contiguous=("x",), reference=reference,
    samples=samples, backward=backward, doc="x * sigmoid(beta * x) (example plugin op)")
