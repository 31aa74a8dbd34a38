"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, where, clamp."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..errors import DTypeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample
from ..shapes import elementwise
from ._common import (
    ALL, BINARY_SHAPES, NUMERIC, SIGNED, UNARY_SHAPES, away_from_zero, binary_samples, bool_result,
    unary_samples, uniform,
)


def _sigmoid(x: np.ndarray) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


UNARY: dict[str, tuple[Any, Any, tuple[Any, ...], str]] = {
    # name: (reference, sample domain, dtypes, differentiable input or "")
    "neg": (np.negative, uniform(-3, 3), SIGNED, "x"),
    "abs": (np.abs, away_from_zero(0.1, 3), SIGNED, "x"),
    "exp": (np.exp, uniform(-3, 3), FLOAT_DTYPES, "x"),
    "log": (np.log, uniform(0.1, 5), FLOAT_DTYPES, "x"),
    "sqrt": (np.sqrt, uniform(0.1, 5), FLOAT_DTYPES, "x"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), uniform(0.1, 5), FLOAT_DTYPES, "x"),
    "sin": (np.sin, uniform(-3, 3), FLOAT_DTYPES, "x"),
    "cos": (np.cos, uniform(-3, 3), FLOAT_DTYPES, "x"),
    "tanh": (np.tanh, uniform(-3, 3), FLOAT_DTYPES, "x"),
    "sigmoid": (_sigmoid, uniform(-4, 4), FLOAT_DTYPES, "x"),
    "relu": (lambda x: np.maximum(x, 0), away_from_zero(0.05, 3), SIGNED, "x"),
}

BINARY: dict[str, tuple[Any, Any, Any, tuple[Any, ...]]] = {
    # name: (reference, domain a, domain b, dtypes)
    "add": (np.add, uniform(-3, 3), None, NUMERIC),
    "sub": (np.subtract, uniform(-3, 3), None, NUMERIC),
    "mul": (np.multiply, uniform(-3, 3), None, NUMERIC),
    "div": (np.divide, uniform(-3, 3), away_from_zero(0.5, 3), FLOAT_DTYPES),
    "pow": (np.power, uniform(0.2, 3), uniform(-2, 2), FLOAT_DTYPES),
    "maximum": (np.maximum, uniform(-3, 3), None, NUMERIC),
    "minimum": (np.minimum, uniform(-3, 3), None, NUMERIC),
}

COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def _compare_samples(rng: np.random.Generator) -> list[Sample]:
    # Small integers so that equal pairs occur and every dtype represents them exactly.
    return [Sample([rng.integers(-3, 4, sa).astype(np.float64), rng.integers(-3, 4, sb).astype(np.float64)],
                   grad=False, name=f"{sa}x{sb}") for sa, sb in BINARY_SHAPES]


def _where_ref(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c.astype(bool), a, b)


def _where_samples(rng: np.random.Generator) -> list[Sample]:
    shapes = [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), (3, 4)), ((), (2, 3), (1,)), ((0, 2), (2,), (1, 2))]
    return [Sample([rng.integers(0, 2, sc).astype(bool), rng.uniform(-3, 3, sa), rng.uniform(-3, 3, sb)],
                   name=f"{sc}/{sa}/{sb}") for sc, sa, sb in shapes]


def _where_dtype(dtypes: Sequence[Any], attrs: Mapping[str, Any]) -> list[Any]:
    # a float condition is almost always a mistake (a mask of 0.5s is not "true"): refuse it as PyTorch does
    if getattr(dtypes[0], "name", "bool") != "bool":
        raise DTypeError(f"where: the condition must be a bool tensor, got {dtypes[0]}; compare first "
                         f"(e.g. where(x > 0, a, b)) or convert with .bool()")
    return [dtypes[1]]


def _where_errors() -> list[ErrorSample]:
    return [ErrorSample([np.ones(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)], {}, DTypeError,
                        "condition must be a bool")]


def _clamp_ref(x: np.ndarray, min: float | None = None, max: float | None = None) -> np.ndarray:
    out = x
    if min is not None:
        out = np.maximum(out, min)
    if max is not None:
        out = np.minimum(out, max)
    return out


def _clamp_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for attrs in ({"min": -1.0, "max": 1.0}, {"min": 0.5}, {"max": -0.25}):
        for s in UNARY_SHAPES:
            x = rng.uniform(-3, 3, s)
            # keep values off the clamp bounds, where the gradient jumps
            x = np.where(np.abs(np.abs(x) - 1.0) < 0.05, x + 0.2, x)
            x = np.where(np.abs(x - 0.5) < 0.05, x + 0.2, x)
            x = np.where(np.abs(x + 0.25) < 0.05, x + 0.2, x)
            out.append(Sample([x], attrs, name=f"{s}{attrs}"))
    return out


def register(registry: OpRegistry) -> None:
    for name, (ref, domain, dtypes, diff) in UNARY.items():
        registry.register(OpSchema(name, ("x",), elementwise(name), broadcast=True, dtypes=dtypes,
                                   differentiable=(diff,) if diff else (), reference=ref,
                                   samples=unary_samples(domain), doc=f"elementwise {name}"))
    for name, (ref, da, db, dtypes) in BINARY.items():
        registry.register(OpSchema(name, ("a", "b"), elementwise(name), broadcast=True, dtypes=dtypes,
                                   differentiable=("a", "b"), reference=ref,
                                   samples=binary_samples(da, db), doc=f"elementwise {name}, broadcasting"))
    for name, ref in COMPARE.items():
        registry.register(OpSchema(name, ("a", "b"), elementwise(name), broadcast=True, dtypes=ALL,
                                   dtype=bool_result, reference=ref, samples=_compare_samples,
                                   doc=f"elementwise comparison {name}; bool result"))
    registry.register(OpSchema(
        "where", ("cond", "a", "b"), elementwise("where"), broadcast=True, dtypes=NUMERIC,
        dtype=_where_dtype, dispatch_on=1, differentiable=("a", "b"), reference=_where_ref, samples=_where_samples,
        error_samples=_where_errors, doc="where(cond, a, b): a where cond else b; cond is bool; the dtype is a's"))
    registry.register(OpSchema(
        "clamp", ("x",), elementwise("clamp"), attrs={"min": None, "max": None}, broadcast=True,
        dtypes=NUMERIC, differentiable=("x",), reference=_clamp_ref, samples=_clamp_samples,
        doc="clamp(x, min, max) with Python-number bounds (either may be None)"))
