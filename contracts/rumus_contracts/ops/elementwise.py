"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, logic, where, clamp.

The kernels of every op here but where and clamp are rendered from its entry in expressions.py;
this module holds what stays hand-written: float64 references and sample domains."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DTypeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from ..shapes import elementwise
from . import expr_schemas as table
from ._common import (
    ALL, BINARY_SHAPES, NUMERIC, UNARY_SHAPES, Domain, away_from_zero, binary_samples, bool_result, result_dtype,
    unary_samples, uniform,
)
from .expressions import EXPRESSIONS


def _sigmoid(x: np.ndarray) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _off_integers(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Values in (-4, 4) at least 0.05 from every integer and half-integer: rounding ops are smooth there."""
    x: np.ndarray = rng.integers(-8, 8, shape) / 2.0 + rng.uniform(0.05, 0.45, shape)
    return x


def _special(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Finite values mixed with NaN and +-inf (for isnan/isinf/isfinite)."""
    x = rng.uniform(-3, 3, shape)
    pick = rng.integers(0, 4, shape)
    return np.where(pick == 0, np.nan, np.where(pick == 1, np.inf * np.sign(x), x))


def _small_ints(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    out: np.ndarray = rng.integers(-2, 3, shape).astype(np.float64)
    return out


def _odd_sixteenths(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """(2k+1)/16: a quotient by a power of two is exact and never an integer (no floor ties)."""
    out: np.ndarray = (2 * rng.integers(-40, 40, shape) + 1) / 16.0
    return out


def _powers_of_two(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    out: np.ndarray = rng.choice([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0], size=shape)
    return out


def _halves(rng: np.random.Generator) -> list[Sample]:
    """Exact halves: round goes to even there (no gradient check at the jumps)."""
    return [Sample([np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0, -0.0])], grad=False, name="halves")]


# name: (float64 reference, sample domain); dtypes, attributes and derivatives come from the expression table
UNARY: dict[str, tuple[Any, Domain]] = {
    "neg": (np.negative, uniform(-3, 3)),
    "abs": (np.abs, away_from_zero(0.1, 3)),
    "exp": (np.exp, uniform(-3, 3)),
    "log": (np.log, uniform(0.1, 5)),
    "sqrt": (np.sqrt, uniform(0.1, 5)),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), uniform(0.1, 5)),
    "sin": (np.sin, uniform(-3, 3)),
    "cos": (np.cos, uniform(-3, 3)),
    "tanh": (np.tanh, uniform(-3, 3)),
    "sigmoid": (_sigmoid, uniform(-4, 4)),
    "relu": (lambda x: np.maximum(x, 0), away_from_zero(0.05, 3)),
    "log1p": (np.log1p, uniform(-0.9, 3)),
    "expm1": (np.expm1, uniform(-3, 3)),
    "floor": (np.floor, _off_integers),
    "ceil": (np.ceil, _off_integers),
    "round": (np.round, _off_integers),
    "trunc": (np.trunc, _off_integers),
    "sign": (np.sign, away_from_zero(0.1, 3)),
    "reciprocal": (lambda x: 1.0 / x, away_from_zero(0.5, 3)),
    "square": (np.square, uniform(-3, 3)),
    "isnan": (np.isnan, _special),
    "isinf": (np.isinf, _special),
    "isfinite": (np.isfinite, _special),
    "logical_not": (np.logical_not, _small_ints),
}
EXTRA_SAMPLES: dict[str, Any] = {"round": _halves}

BINARY: dict[str, tuple[Any, Domain, Domain | None]] = {
    # name: (reference, domain a, domain b)
    "add": (np.add, uniform(-3, 3), None),
    "sub": (np.subtract, uniform(-3, 3), None),
    "mul": (np.multiply, uniform(-3, 3), None),
    "div": (np.divide, uniform(-3, 3), away_from_zero(0.5, 3)),
    "pow": (np.power, uniform(0.2, 3), uniform(-2, 2)),
    "maximum": (np.maximum, uniform(-3, 3), None),
    "minimum": (np.minimum, uniform(-3, 3), None),
    "floor_divide": (np.floor_divide, _odd_sixteenths, _powers_of_two),
    "remainder": (np.remainder, _odd_sixteenths, _powers_of_two),
    "fmod": (np.fmod, _odd_sixteenths, _powers_of_two),
    "atan2": (np.arctan2, away_from_zero(0.3, 3), away_from_zero(0.3, 3)),
    "logical_and": (np.logical_and, _small_ints, None),
    "logical_or": (np.logical_or, _small_ints, None),
    "logical_xor": (np.logical_xor, _small_ints, None),
    "logaddexp": (np.logaddexp, uniform(-4, 4), None),
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


def _unary_gen(name: str, domain: Domain) -> Callable[[np.random.Generator], list[Sample]]:
    base, extra = unary_samples(domain), EXTRA_SAMPLES.get(name)
    return base if extra is None else (lambda rng: [*base(rng), *extra(rng)])


# autocast classes of the elementwise ops that have one (PyTorch's float32 and promote lists); the
# others already promote their operands to one dtype like every broadcasting op
AUTOCAST = {"exp": "float32", "expm1": "float32", "log": "float32", "log1p": "float32", "pow": "float32",
            "reciprocal": "float32", "rsqrt": "float32", "atan2": "promote", "where": "promote"}


def register(registry: OpRegistry) -> None:
    for name, (ref, domain) in UNARY.items():
        registry.register(OpSchema(name, ("x",), elementwise(name), broadcast=True, dtypes=table.dtypes(name),
                                   autocast=AUTOCAST.get(name),
                                   dtype=bool_result if EXPRESSIONS[name].result == "bool" else result_dtype,
                                   differentiable=table.differentiable(name), reference=ref,
                                   samples=_unary_gen(name, domain), doc=f"elementwise {name}"))
        table.register_backward(registry, name, {"x": domain})
    for name, (ref, da, db) in BINARY.items():
        registry.register(OpSchema(name, ("a", "b"), elementwise(name), broadcast=True, dtypes=table.dtypes(name),
                                   autocast=AUTOCAST.get(name),
                                   dtype=bool_result if EXPRESSIONS[name].result == "bool" else result_dtype,
                                   differentiable=table.differentiable(name), reference=ref,
                                   samples=binary_samples(da, db), doc=f"elementwise {name}, broadcasting"))
        table.register_backward(registry, name, {"x": da, "y": db or da})
    for name, ref in COMPARE.items():
        registry.register(OpSchema(name, ("a", "b"), elementwise(name), broadcast=True, dtypes=ALL,
                                   dtype=bool_result, reference=ref, samples=_compare_samples,
                                   doc=f"elementwise comparison {name}; bool result"))
    registry.register(OpSchema(
        "where", ("cond", "a", "b"), elementwise("where"), broadcast=True, dtypes=NUMERIC, autocast="promote",
        dtype=_where_dtype, dispatch_on=1, differentiable=("a", "b"), reference=_where_ref, samples=_where_samples,
        error_samples=_where_errors, doc="where(cond, a, b): a where cond else b; cond is bool; the dtype is a's"))
    registry.register(OpSchema(
        "clamp", ("x",), elementwise("clamp"), attrs={"min": None, "max": None}, broadcast=True,
        dtypes=NUMERIC, differentiable=("x",), reference=_clamp_ref, samples=_clamp_samples,
        doc="clamp(x, min, max) with Python-number bounds (either may be None)"))
