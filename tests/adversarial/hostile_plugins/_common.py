"""A well-formed op schema the hostile plugins can build on, so each breaks only its own rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import OpSchema, Sample, TensorArg, float32, float64


def reference(x: np.ndarray) -> np.ndarray:
    return -x


def samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, (3, 4))]), Sample([rng.uniform(-1, 1, ())])]


def same_shape(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> list[tuple[int, ...]]:
    return [tuple(shapes[0])]


def schema(name: str, **overrides: Any) -> OpSchema:
    fields: dict[str, Any] = dict(inputs=("x",), shape=same_shape, dtypes=(float32, float64), reference=reference,
                                  samples=samples, contiguous=("x",))
    fields.update(overrides)
    return OpSchema(name, **fields)


def negate_cpu(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """A correct CPU kernel for a contiguous unary op (the CPU backend's buffers are flat numpy arrays)."""
    (out,), (x,) = outputs, inputs
    n = x.numel
    np.negative(x.buffer[x.offset:x.offset + n], out=out.buffer[out.offset:out.offset + n])
