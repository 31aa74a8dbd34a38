"""matmul through numpy's BLAS: operands are handed over as strided views, never copied here
(numpy copies internally only where BLAS cannot take the strides)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, TensorArg

from .dtypes import FLOAT
from .threads import gemm_threads


def view(arg: TensorArg) -> np.ndarray:
    """The numpy view of a TensorArg (strides and offset are in elements)."""
    buf = arg.buffer
    isz = buf.itemsize
    return np.ndarray(arg.shape, buf.dtype, buf, arg.offset * isz, tuple(s * isz for s in arg.strides))


def matmul(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """[..., n, k] @ [..., k, m] -> [..., n, m]; batch dims broadcast."""
    o = outputs[0]
    if 0 in o.shape:
        return
    a, b = inputs
    out = view(o)
    if a.shape[-1] == 0:  # k == 0: an empty sum
        out[...] = 0
        return
    # threads for one GEMM of the batch (numpy calls BLAS once per matrix), from its multiply-adds
    rows, cols = (o.shape[-2] if len(o.shape) >= 2 else 1), (o.shape[-1] if o.shape else 1)
    gemm_threads(a.shape[-1] * rows * cols)
    np.matmul(view(a), view(b), out=out)


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [("matmul", matmul, FLOAT)]
