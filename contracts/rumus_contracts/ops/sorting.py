"""argsort: the one sorting primitive. sort, topk, msort and kthvalue-style uses are built from it in the
core (values = gather(x, dim, argsort(x))), so their gradients flow through gather.

Stable in both directions (ties keep their input order, as torch.sort(stable=True)); NaN sorts as the
largest value (last ascending, first descending), as in PyTorch. The output is int64, keepdim-free: it has
x's shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..schema import OpRegistry, OpSchema, Sample, Shape
from ._common import NUMERIC, int64_result


def stable_argsort(x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    if x.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(x, axis=dim, kind="stable").astype(np.int64)
    # descending and stable: sort the reversed row ascending, reverse the order, map positions back
    n = x.shape[dim]
    rev = np.flip(x, axis=dim)
    order = np.flip(np.argsort(rev, axis=dim, kind="stable"), axis=dim)
    out: np.ndarray = (n - 1 - order).astype(np.int64)
    return out


def _shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    shape = tuple(shapes[0])
    dim = int(attrs["dim"])
    if shape and not 0 <= dim < len(shape):
        raise ShapeError(f"argsort: dim {dim} is out of range for shape {shape} (the core normalizes negatives)")
    return [shape]


def _samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    cases = (((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1), ((1, 1), 0), ((0, 3), 1), ((), 0), ((4, 33), 1))
    for shape, dim in cases:
        for descending in (False, True):
            x = rng.integers(-3, 4, size=shape).astype(np.float64)  # few distinct values: ties must be stable
            out.append(Sample([x], {"dim": dim, "descending": descending}, grad=False,
                              name=f"{shape}/{dim}/{'desc' if descending else 'asc'}"))
    return out


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "argsort", ("x",), _shape, attrs={"dim": 0, "descending": False}, dtype=int64_result, dtypes=NUMERIC,
        reference=lambda x, dim, descending: stable_argsort(x, dim, descending), samples=_samples,
        doc="stable argsort along dim; NaN is the largest value; int64 indices with x's shape"))
