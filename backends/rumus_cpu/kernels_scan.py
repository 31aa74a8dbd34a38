"""cumsum / cumprod along one dim: sequential per row, accumulated in float64 (PyTorch's CPU accumulate
type for float32 and float64), so a small value next to a large one is kept as PyTorch keeps it
(cumsum([1, 1e8, -1e8, 1, 1]) = [1, 1e8, 1, 2, 3]) and a product passes through zeros and infinities in
order (cumprod([0, 1e30, 1e30, 2]) = 0s; [1e30, 1e30, 1e-30] = [1e30, inf, 1e30]). numpy's cumsum and
cumprod run each row in order. float16/bfloat16 accumulate in float32 (widen.py), as PyTorch does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import Kernel, TensorArg

from .dtypes import FLOAT, HALF
from .kernels_linalg import view
from .widen import widened_to_float32


def _scan(fn: Any) -> Kernel:
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        o, x = outputs[0], inputs[0]
        if o.numel == 0:
            return
        src = view(x)
        if not o.shape:
            view(o)[...] = src
            return
        with np.errstate(all="ignore"):  # overflow to inf and 0 * inf = NaN are the IEEE answers
            view(o)[...] = fn(src, axis=int(attrs["dim"]), dtype=np.float64)
    return kernel


KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    ("cumsum", _scan(np.cumsum), FLOAT),
    ("cumprod", _scan(np.cumprod), FLOAT),
    ("cumsum", widened_to_float32(_scan(np.cumsum)), HALF),
    ("cumprod", widened_to_float32(_scan(np.cumprod)), HALF),
]
