"""A Linear layer with its bias as one op (PyTorch's F.linear with a bias):

    linear(x [..., in], weight [out, in], bias [out]) -> x @ weight.T + bias   [..., out]

A composite (matmul with the weight's transposed view, then a broadcast add) that a backend may replace
with a fused kernel: the CPU backend adds the bias in its GEMM blocks' epilogue. Either way it is one node
of the autograd graph instead of three (a permute view, a matmul, an add), with a backward of its own:
on small layers the graph's Python, not the kernels, is what a training step spends its time in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..errors import ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape


def _shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, w, b = (tuple(s) for s in shapes)
    if len(w) != 2:
        raise ShapeError(f"linear: weight must be 2-D [out_features, in_features], got shape {w}")
    if len(x) == 0 or x[-1] != w[1]:
        raise ShapeError(f"linear: input of shape {x} has {x[-1] if x else 0} features, but the weight {w} "
                         f"expects in_features={w[1]}")
    if b != (w[0],):
        raise ShapeError(f"linear: bias of shape {b} does not fit weight {w}: expected one value per output "
                         f"feature, shape ({w[0]},)")
    return [(*x[:-1], w[0])]


def linear_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.matmul(x, w.T) + b
    return out


# (x shape, weight shape): 2-D and 3-D batches, an unbatched 1-D x, in or out of 1, no rows, no features
CASES: tuple[tuple[Shape, Shape], ...] = (
    ((3, 4), (5, 4)), ((2, 3, 4), (6, 4)), ((4,), (3, 4)), ((3, 1), (5, 1)), ((3, 4), (1, 4)),
    ((17, 33), (9, 33)), ((0, 3), (2, 3)), ((3, 0), (2, 0)),
)


def _samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws), rng.uniform(-1, 1, ws[0])], name=f"x{xs} w{ws}")
            for xs, ws in CASES]


def _errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((3, 4)), z((5, 3)), z((5,))], {}, ShapeError, "expects in_features=3"),
            ErrorSample([z((3, 4)), z((5, 4)), z((4,))], {}, ShapeError, "one value per output feature"),
            ErrorSample([z((3, 4)), z((5, 4, 1)), z((5,))], {}, ShapeError, "2-D")]


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "linear", ("x", "weight", "bias"), _shape, autocast="lower", dtypes=FLOAT_DTYPES,
        contiguous=("x", "weight", "bias"), differentiable=("x", "weight", "bias"), composite=True,
        reference=linear_reference, samples=_samples, error_samples=_errors,
        tolerance={"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)},
        tolerance_reason="sums of in_features products: rounding grows with in_features (33 in the samples)",
        doc="x [..., in] @ weight[out, in].T + bias [out] (PyTorch's linear with a bias): a composite of matmul "
            "and add, which a backend may replace with a fused kernel (the bias in its GEMM's epilogue)"))
