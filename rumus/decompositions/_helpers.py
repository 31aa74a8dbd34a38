"""What the decomposition families share: kernel-level op access, constants, in-place writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType

from .. import _math
from .._creation import from_host
from .._dispatch import scalar_tensor
from .._tensor_base import Tensor
from ..ops import get as op

__all__ = ["arange_like", "const", "op", "reduce_dims", "total", "write"]


def write(dst: Tensor, value: Tensor) -> None:
    """dst's elements := value (cast to dst's dtype, broadcast to its shape), bumping dst's version: the
    in-place write of an in-place op's decomposition (which runs without recording, as its kernel does)."""
    if value.dtype != dst.dtype:
        value = _math.cast(value, dst.dtype)
    _math.copy_into(dst, value)


def const(value: Any, like: Tensor, dtype: DType | None = None) -> Tensor:
    """A 0-d constant of like's dtype (or `dtype`) on like's device."""
    return scalar_tensor(value, dtype or like.dtype, like._storage.device)


def arange_like(n: int, like: Tensor, dtype: DType) -> Tensor:
    """0..n-1 on like's device: uploaded, not computed (there is no arange kernel to rely on)."""
    return from_host(np.arange(n, dtype=np.int64).astype(dtype.numpy), dtype, like._storage.device)


def reduce_dims(ndim: int, dims: Sequence[int] | None = None) -> tuple[int, ...]:
    """dims as a kernel-level reduction takes them (sorted); None: all of an ndim tensor's dims."""
    return tuple(range(ndim)) if dims is None else tuple(sorted(int(d) for d in dims))


def total(x: Tensor) -> Tensor:
    """The sum of every element, keepdim shape (a 0-d tensor sums to itself)."""
    return op("sum")(x, dims=reduce_dims(x.ndim))
