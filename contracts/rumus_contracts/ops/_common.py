"""Sample generators and dtype groups shared by the op schemas."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES, DType, bool_, int8, int32, int64, uint8
from ..schema import Sample, Shape

NUMERIC: tuple[DType, ...] = (*FLOAT_DTYPES, int64, int32, int8, uint8)
SIGNED: tuple[DType, ...] = (*FLOAT_DTYPES, int64, int32, int8)
ALL: tuple[DType, ...] = (*NUMERIC, bool_)

# Shapes every elementwise op is tried on: plain, 0-d, size-1 and size-0 dims, larger.
UNARY_SHAPES: tuple[Shape, ...] = ((3, 4), (), (1,), (2, 1, 3), (0, 3), (5, 7, 6))
BINARY_SHAPES: tuple[tuple[Shape, Shape], ...] = (
    ((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 1), (1, 4)), ((), (2, 3)), ((0, 3), (3,)),
    ((1,), (1,)), ((4, 1, 5), (3, 5)),
)

Domain = Callable[[np.random.Generator, Shape], np.ndarray]


def uniform(lo: float, hi: float) -> Domain:
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def away_from_zero(lo: float, hi: float) -> Domain:
    """Values with |x| in [lo, hi], random signs: keeps kinks (relu, abs) away from gradient checks."""
    def gen(rng: np.random.Generator, shape: Shape) -> np.ndarray:
        out: np.ndarray = rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        return out
    return gen


def unary_samples(domain: Domain, attrs: Iterable[Mapping[str, Any]] = ({},)) -> Callable[
        [np.random.Generator], list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([domain(rng, s)], dict(a), name=f"{s}") for a in attrs for s in UNARY_SHAPES]
    return gen


def binary_samples(da: Domain, db: Domain | None = None,
                   shapes: Sequence[tuple[Shape, Shape]] = BINARY_SHAPES) -> Callable[
        [np.random.Generator], list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([da(rng, sa), (db or da)(rng, sb)], name=f"{sa}x{sb}") for sa, sb in shapes]
    return gen


def result_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0]]


def bool_result(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [bool_]


def int64_result(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [int64]
