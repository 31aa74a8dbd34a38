"""Data movement: strided copy with dtype conversion, and fill. Their outputs may be strided views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, parse_dtype
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
    if target.is_integer:
        return np.trunc(x)  # C casts truncate toward zero
    return x.copy()


def _copy_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for target in (None, "float32", "float64", "int32", "int64", "bool"):
        for s in UNARY_SHAPES:
            # integers and exact halves: every dtype in ALL represents them, casts stay exact
            x = rng.integers(-4, 5, s).astype(np.float64) / (1.0 if target and "int" in target else 2.0)
            out.append(Sample([x], {"dtype": target}, grad=target in (None, "float32", "float64"),
                              name=f"{s}->{target}"))
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
        doc="strided copy converting to attrs['dtype'] (floats to ints truncate, to bool is x != 0); "
            "the output may be a strided view (used for slice assignment and cat)"))
    registry.register(OpSchema(
        "fill", (), _fill_shape, attrs={"shape": (), "value": 0.0, "dtype": "float32"}, dtype=_fill_dtype,
        dtypes=ALL, reference=_fill_ref, samples=_fill_samples,
        doc="write one value everywhere; the output may be a strided view (zero_, fill_)"))
