"""argsort on the CPU through numpy's stable sort (timsort/radix, compiled), over strided views: a sort
has no elementwise body for the C generator, and numpy's is already the fast stable one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, TensorArg
from rumus_contracts.kit import strided_view as view

from .dtypes import HALF, NUMERIC


def argsort(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, x = view(outputs[0]), view(inputs[0])
    if inputs[0].dtype.name == "bfloat16":  # uint16 words: their float32 values order the same way
        x = (x.astype(np.uint32) << 16).view(np.float32)
    if x.ndim == 0:
        out[...] = 0
        return
    if x.size == 0:
        return
    dim = int(attrs["dim"])
    if not attrs["descending"]:
        out[...] = np.argsort(x, axis=dim, kind="stable")
        return
    # descending and stable: ascending sort of the reversed row, reversed, positions mapped back
    n = x.shape[dim]
    order = np.flip(np.argsort(np.flip(x, axis=dim), axis=dim, kind="stable"), axis=dim)
    out[...] = (n - 1) - order


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [("argsort", argsort, (*NUMERIC, *HALF))]
