"""Matrix multiplication: [..., n, k] @ [..., k, m] with broadcast batch dims (1-D is the core's job)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from ..errors import ShapeError
from ..shapes import matmul_shape

CASES: tuple[tuple[Shape, Shape], ...] = (
    ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((2, 3, 4), (2, 4, 2)), ((2, 3, 4), (4, 6)),
    ((3, 1, 2, 5), (4, 5, 3)), ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((17, 33), (33, 9)),
)


def _shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    return [matmul_shape("matmul", tuple(shapes[0]), tuple(shapes[1]))]


def _samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, a), rng.uniform(-1, 1, b)], name=f"{a}@{b}") for a, b in CASES]


def _errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((3, 4)), np.zeros((5, 2))], {}, ShapeError, "(3, 4)")]


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "matmul", ("a", "b"), _shape, autocast="lower", dtypes=FLOAT_DTYPES, differentiable=("a", "b"),
        reference=np.matmul, samples=_samples, error_samples=_errors,
        tolerance={"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)},
        tolerance_reason="sums of k products: rounding grows with k (k up to 33 in the samples)",
        doc="batched matrix product; batch dims broadcast; operands may be transposed views"))
