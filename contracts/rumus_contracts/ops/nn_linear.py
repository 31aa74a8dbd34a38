"""A Linear layer with its bias as one op (PyTorch's F.linear with a bias):

    linear(x [..., in], weight [out, in], bias [out]) -> x @ weight.T + bias   [..., out]

    linear_backward(grad [rows, out], x [rows, in], weight [out, in]) -> (grad @ weight, grad.T @ x, grad.sum(0))

Both are composites (matmul with the weight's transposed view, then a broadcast add; two matmuls and a
column sum) that a backend may replace with a fused kernel: the CPU backend adds the bias in its GEMM
blocks' epilogue, and runs the backward's three products as one call. Either way linear is one node of the
autograd graph instead of three (a permute view, a matmul, an add), and its backward one op instead of
three and two views: on small layers the graph's Python, not the kernels, is what a training step spends
its time in.
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


def _backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    g, x, w = (tuple(s) for s in shapes)
    if len(g) != 2 or len(x) != 2 or len(w) != 2:
        raise ShapeError(f"linear_backward: grad, x and weight must be 2-D ([rows, out], [rows, in], [out, in]), "
                         f"got {g}, {x}, {w}")
    if x[1] != w[1] or g != (x[0], w[0]):
        raise ShapeError(f"linear_backward: grad {g} does not fit x {x} and weight {w}: expected "
                         f"({x[0]}, {w[0]}) with x's features {x[1]} equal to the weight's {w[1]}")
    return [x, w, (w[0],)]


def linear_backward_reference(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    return np.matmul(g, w), np.matmul(g.T, x), g.sum(axis=0)


def _backward_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for xs, ws in CASES:
        if len(xs) == 2:
            rows = xs[0]
            out.append(Sample([rng.uniform(-1, 1, (rows, ws[0])), rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)],
                              grad=False, name=f"x{xs} w{ws}"))
    return out


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
    registry.register(OpSchema(
        "linear_backward", ("grad", "x", "weight"), _backward_shape, num_outputs=3, dtypes=FLOAT_DTYPES,
        dtype=lambda dtypes, attrs: [dtypes[0]] * 3, composite=True,
        reference=linear_backward_reference, samples=_backward_samples,
        error_samples=lambda: [ErrorSample([np.zeros((3, 5)), np.zeros((3, 4)), np.zeros((5, 3))], {}, ShapeError,
                                           "does not fit")],
        tolerance={"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)},
        tolerance_reason="sums of rows or features products (17 or 33 in the samples)",
        doc="the gradients of linear (x, weight, bias) from the output's [rows, out] gradient: a composite of two "
            "matmuls and a column sum, which a backend may run as one call"))
