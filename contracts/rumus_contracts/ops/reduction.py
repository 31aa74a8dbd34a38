"""Reductions and softmax. Kernels always write the keepdim shape; the core squeezes afterwards.

`dims` reaching a kernel is a sorted tuple of distinct non-negative dims (the core normalizes user
input); `dims=()` on a 0-d tensor reduces nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES, DType, int64
from ..errors import ShapeError
from ..schema import OpRegistry, OpSchema, Sample, Shape
from ..shapes import reduced
from ._common import NUMERIC, int64_result

REDUCE_CASES: tuple[tuple[Shape, tuple[int, ...]], ...] = (
    ((3, 4), (1,)), ((3, 4), (0,)), ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)), ((5,), (0,)), ((), ()),
    ((1, 1), (0,)), ((4, 1, 3), (1,)), ((7, 33), (1,)), ((2, 0, 3), (2,)),
)


def _check_dims(op: str, shape: Shape, dims: Any) -> tuple[int, ...]:
    norm: tuple[int, ...] = tuple(int(d) for d in dims)
    if list(norm) != sorted(set(norm)) or any(not 0 <= d < len(shape) for d in norm):
        raise ShapeError(f"{op}: dims {norm} must be sorted, distinct and within 0..{len(shape) - 1}")
    return norm


def _reduce_shape(op: str, nonempty: bool = False) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        dims = _check_dims(op, shapes[0], attrs["dims"])
        if nonempty and any(shapes[0][d] == 0 for d in dims):
            raise ShapeError(f"{op}: cannot reduce over a zero-size dimension of shape {shapes[0]} "
                             f"(there is no identity for {op})")
        return [reduced(shapes[0], dims)]
    return rule


def _arg_shape(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        (dim,) = _check_dims(op, shapes[0], (attrs["dim"],)) if shapes[0] else (0,)
        if shapes[0] and shapes[0][dim] == 0:
            raise ShapeError(f"{op}: cannot take {op} over a zero-size dimension of shape {shapes[0]}")
        return [reduced(shapes[0], (dim,))]
    return rule


def _softmax_shape(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        if shapes[0]:
            _check_dims(op, shapes[0], (attrs["dim"],))
        return [tuple(shapes[0])]
    return rule


def _sum_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0] if dtypes[0].is_floating else int64]


def _reduce_samples(values: str = "uniform", cases: Sequence[tuple[Shape, tuple[int, ...]]] = REDUCE_CASES,
                    allow_empty: bool = True) -> Any:
    def gen(rng: np.random.Generator) -> list[Sample]:
        out = []
        for shape, dims in cases:
            if not allow_empty and 0 in shape:
                continue
            x: np.ndarray
            if values == "distinct":  # a unique max/min per slice keeps gradients defined
                x = rng.permutation(max(int(np.prod(shape)), 1))[: int(np.prod(shape))].reshape(shape)
                x = x.astype(np.float64) / 4.0 - 2.0
            elif values == "small":
                x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
            else:
                x = rng.uniform(-2, 2, shape)
            out.append(Sample([x], {"dims": dims}, name=f"{shape}/{dims}"))
        return out
    return gen


def _arg_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape, dim in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 2), ((5,), 0), ((1, 1), 0), ((6, 9), 1)):
        x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64) - 5
        out.append(Sample([x], {"dim": dim}, grad=False, name=f"{shape}/{dim}"))
    return out


def _softmax_samples(rng: np.random.Generator) -> list[Sample]:
    cases = (((3, 4), 1), ((3, 4), 0), ((2, 3, 5), 1), ((7,), 0), ((2, 0, 3), 2), ((4, 1), 1), ((2, 65), 1))
    return [Sample([rng.uniform(-4, 4, s)], {"dim": d}, name=f"{s}/{d}") for s, d in cases] + [
        Sample([INFINITE_ROWS], {"dim": 1}, grad=False, name="infinite rows")]


# Rows with infinities and NaN, one per row: PyTorch's results are the max-shifted formulas evaluated
# in IEEE arithmetic (a +inf row gives NaN for softmax, a -inf entry weight 0, an all -inf row NaN).
INFINITE_ROWS = np.array([
    [np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0], [np.inf, np.inf, 0.0],
    [np.inf, -np.inf, 0.0], [np.nan, 0.0, 1.0], [-np.inf, -np.inf, 2.0], [1.0, 2.0, 3.0]])


def _logsumexp_samples(rng: np.random.Generator) -> list[Sample]:
    return list(_reduce_samples(allow_empty=False)(rng)) + [
        Sample([INFINITE_ROWS], {"dims": (1,)}, grad=False, name="infinite rows"),
        Sample([INFINITE_ROWS], {"dims": (0, 1)}, grad=False, name="infinite all")]


def _softmax(x: np.ndarray, dim: int) -> Any:
    if x.ndim == 0:
        return np.ones_like(x)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=dim, keepdims=True)) if x.size else x
        return e / e.sum(axis=dim, keepdims=True) if x.size else x


def _log_softmax(x: np.ndarray, dim: int) -> Any:
    if x.ndim == 0:
        return np.zeros_like(x)
    if not x.size:
        return x
    m = x.max(axis=dim, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return x - m - np.log(np.exp(x - m).sum(axis=dim, keepdims=True))


def _logsumexp(x: np.ndarray, dims: tuple[int, ...]) -> Any:
    if not dims:
        return x.copy()
    m = np.max(x, axis=dims, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)  # PyTorch's rule: an infinite max shifts by 0 (no inf - inf)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return m + np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True))


def _var(x: np.ndarray, dims: tuple[int, ...], correction: int = 1) -> Any:
    n = int(np.prod([x.shape[d] for d in dims])) if dims else 1
    mean = np.mean(x, axis=dims, keepdims=True) if dims else x
    return np.sum((x - mean) ** 2, axis=dims, keepdims=True) / max(n - correction, 0) if dims else \
        np.zeros_like(x) / max(n - correction, 0)


def _var_samples(rng: np.random.Generator) -> list[Sample]:
    cases = [c for c in REDUCE_CASES if 0 not in c[0] and int(np.prod([c[0][d] for d in c[1]] or [1])) > 1]
    return [Sample([rng.uniform(-2, 2, s)], {"dims": d, "correction": c}, name=f"{s}/{d}/c{c}")
            for s, d in cases for c in (0, 1)]


def register(registry: OpRegistry) -> None:
    kw: dict[str, Any] = {"attrs": {"dims": ()}, "differentiable": ("x",)}
    registry.register(OpSchema("sum", ("x",), _reduce_shape("sum"), dtype=_sum_dtype, dtypes=NUMERIC,
                               autocast="float32",
                               reference=lambda x, dims: np.sum(x, axis=dims, keepdims=True),
                               samples=_reduce_samples(), doc="sum over dims (keepdim shape)", **kw))
    registry.register(OpSchema("prod", ("x",), _reduce_shape("prod"), dtype=_sum_dtype, dtypes=NUMERIC,
                               autocast="float32",
                               reference=lambda x, dims: np.prod(x, axis=dims, keepdims=True),
                               samples=_reduce_samples("small"), doc="product over dims", **kw))
    extrema: tuple[tuple[str, Any], ...] = (("amax", np.max), ("amin", np.min))
    for name, fn in extrema:
        registry.register(OpSchema(
            name, ("x",), _reduce_shape(name, nonempty=True), dtypes=NUMERIC,
            reference=(lambda f: lambda x, dims: f(x, axis=dims, keepdims=True) if dims else x.copy())(fn),
            samples=_reduce_samples("distinct", allow_empty=False),
            doc=f"{name} over dims; the gradient is shared evenly between tied elements", **kw))
    args: tuple[tuple[str, Any], ...] = (("argmax", np.argmax), ("argmin", np.argmin))
    for name, fn in args:
        registry.register(OpSchema(
            name, ("x",), _arg_shape(name), attrs={"dim": 0}, dtype=int64_result, dtypes=NUMERIC,
            reference=(lambda f: lambda x, dim: np.expand_dims(f(x, axis=dim), dim))(fn),
            samples=_arg_samples, doc=f"{name} along one dim (first index on ties); int64"))
    softmaxes: tuple[tuple[str, Any], ...] = (("softmax", _softmax), ("log_softmax", _log_softmax))
    for name, ref in softmaxes:
        registry.register(OpSchema(name, ("x",), _softmax_shape(name), attrs={"dim": 0}, autocast="float32",
                                   differentiable=("x",), dtypes=FLOAT_DTYPES, reference=ref,
                                   samples=_softmax_samples, doc=f"{name} along dim, max-shifted"))
    # Composites: written in the core from the kernels above; tested here like any other op.
    registry.register(OpSchema("mean", ("x",), _reduce_shape("mean"), dtypes=FLOAT_DTYPES, composite=True,
                               autocast="float32",
                               reference=lambda x, dims: np.mean(x, axis=dims, keepdims=True) if dims else x.copy(),
                               samples=_reduce_samples(allow_empty=False), doc="mean over dims", **kw))
    registry.register(OpSchema("logsumexp", ("x",), _reduce_shape("logsumexp"), autocast="float32", dtypes=FLOAT_DTYPES,
                               composite=True, reference=_logsumexp, samples=_logsumexp_samples,
                               doc="max-shifted log-sum-exp; an infinite max shifts by 0 (PyTorch's rule)", **kw))
    moments: tuple[tuple[str, Any], ...] = (
        ("var", _var), ("std", lambda x, dims, correction=1: np.sqrt(_var(x, dims, correction))))
    for name, ref in moments:
        registry.register(OpSchema(name, ("x",), _reduce_shape(name), attrs={"dims": (), "correction": 1},
                                   autocast="float32",
                                   differentiable=("x",), dtypes=FLOAT_DTYPES, composite=True,
                                   reference=ref, samples=_var_samples,
                                   doc=f"{name} over dims with Bessel-style correction"))
