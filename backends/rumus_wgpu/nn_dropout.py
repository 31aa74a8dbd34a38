"""Counter-based dropout: the keep mask is a hash of (seed, offset + element index), bit-identical to
the CPU kernel's (csrc/nn_dropout.c), so the backward pass recomputes it and backends agree."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import TensorArg

from .layout import dealias, device_of
from .nn_common import dispatch

MASK32 = 0xFFFFFFFF


def mix32(h: int) -> int:
    h &= MASK32
    h ^= h >> 16
    h = (h * 0x21F0AAAD) & MASK32
    h ^= h >> 15
    h = (h * 0x735A2D97) & MASK32
    return h ^ (h >> 15)


def threshold(p: float) -> int:
    """floor(p * 2^32) saturated to 2^32 - 1, as the C kernel's threshold_of."""
    t = p * 4294967296.0
    return MASK32 if t >= 4294967295.0 else int(math.floor(t))


def dropout(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, x = outputs[0], inputs[0]
    n = y.numel
    if n == 0:
        return
    dev = device_of(outputs, inputs)
    (x,), _ = dealias(dev, outputs, [x])
    p = float(attrs["p"])
    key = mix32((int(attrs["seed"]) ^ 0x9E3779B9) & MASK32)
    scale = float(np.float32(1.0 / (1.0 - p)))
    dispatch(dev, "nn_dropout", "dropout", y.dtype, [y.buffer, x.buffer],
             [key, threshold(p), int(attrs["offset"]) & MASK32, scale, y.offset, x.offset], n,
             include=("grid", "dropout_hash"))


def kernels() -> dict[str, Any]:
    return {"dropout": dropout}
