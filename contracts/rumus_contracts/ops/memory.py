"""Data movement: strided copy with dtype conversion, and fill. Their outputs may be strided views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, float32, parse_dtype
from ..schema import OpRegistry, OpSchema, Sample, Shape
from ._common import ALL, UNARY_SHAPES


def _copy_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [parse_dtype(attrs["dtype"]) if attrs["dtype"] is not None else dtypes[0]]


def _copy_ref(x: np.ndarray, dtype: Any = None) -> Any:
    if dtype is None:
        return x.copy()
    target = parse_dtype(dtype)
    if target.is_bool:
        return x != 0
    if target.is_integer and np.issubdtype(x.dtype, np.floating):
        return saturating_int(x, np.dtype(target.numpy))
    if target.is_integer:
        return x.astype(np.int64).astype(target.numpy)  # int -> narrower int wraps, as in C
    return x.copy()


def saturating_int(x: np.ndarray, target: np.dtype[Any]) -> np.ndarray:
    """RUMUS's float -> int rule (docs/ARCHITECTURE.md "Casts"): truncate toward zero, saturate to the
    target's range, NaN -> 0. Exact: the comparisons use bounds that are exact doubles."""
    info = np.iinfo(target)
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.shape, dtype=np.int64)
    inside = (x > float(info.min)) & (x < float(info.max))  # NaN is neither
    out[inside] = np.trunc(x[inside]).astype(np.int64)
    out[x >= float(info.max)] = info.max
    out[x <= float(info.min)] = info.min
    return out.astype(target)


def _copy_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for target in (None, "float32", "float64", "int32", "int64", "bool"):
        for s in UNARY_SHAPES:
            # integers and exact halves: every dtype in ALL represents them, casts stay exact
            x = rng.integers(-4, 5, s).astype(np.float64) / (1.0 if target and "int" in target else 2.0)
            out.append(Sample([x], {"dtype": target}, grad=target in (None, "float32", "float64"),
                              name=f"{s}->{target}"))
    edges = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9, -3e9, 2.75, -2.75, 300.0, -300.0, -0.0])
    for target in ("int32", "int64", "bool"):  # the float -> int rule at NaN, infinities and out of range
        out.append(Sample([edges.astype(np.float32)], {"dtype": target}, grad=False, name=f"edges->{target}",
                          dtypes=[float32]))
    return out


def _fill_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    return [tuple(attrs["shape"])]


def _fill_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [parse_dtype(attrs["dtype"])]


def _fill_ref(shape: Shape, value: float, dtype: Any) -> np.ndarray:
    return np.full(shape, value, dtype=np.float64)


def _fill_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([], {"shape": s, "value": v, "dtype": "float32"}, grad=False, name=f"{s}={v}")
            for s in ((3, 4), (), (0,), (2, 3, 5)) for v in (0.0, 1.0, 2.5)]


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "copy", ("x",), lambda shapes, attrs: [tuple(shapes[0])], attrs={"dtype": None},
        dtype=_copy_dtype, dtypes=ALL, differentiable=("x",), reference=_copy_ref,
        samples=_copy_samples,
        doc="strided copy converting to attrs['dtype'] (floats to ints truncate and saturate, NaN -> 0; to "
            "bool is x != 0); "
            "the output may be a strided view (used for slice assignment and cat)"))
    registry.register(OpSchema(
        "fill", (), _fill_shape, attrs={"shape": (), "value": 0.0, "dtype": "float32"}, dtype=_fill_dtype,
        dtypes=ALL, reference=_fill_ref, samples=_fill_samples,
        doc="write one value everywhere; the output may be a strided view (zero_, fill_)"))
