"""CPU kernel: the CPU backend's buffers are flat numpy arrays (its documented contract)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import TensorArg


def swish_cpu(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out,), (x,) = outputs, inputs  # x is contiguous: the schema says so, the dispatcher ensures it
    n = x.numel
    src = x.buffer[x.offset:x.offset + n]
    dst = out.buffer[out.offset:out.offset + n]
    beta = float(attrs["beta"])
    np.multiply(src, 1.0 / (1.0 + np.exp(-beta * src)), out=dst)
