"""What a kernel sees of a tensor: its buffer plus a strided view of it."""

from __future__ import annotations

import math
from typing import Any

from .dtype import DType


class TensorArg:
    """buffer (backend-owned), shape, strides and offset in elements, dtype.

    Broadcast inputs of elementwise ops arrive already expanded to the output shape with stride 0
    on broadcast dims, so kernels never implement broadcasting rules themselves.

    `native` is the backend's to fill: a handle it derives from `buffer` and wants to keep for the next call
    that gets this same argument (the core reuses a tensor's argument while its storage and layout stay;
    the CPU backend keeps its C pointer there). None until the backend sets it; the core never reads it.
    """

    __slots__ = ("buffer", "shape", "strides", "offset", "dtype", "native")

    def __init__(self, buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
                 dtype: DType) -> None:
        self.buffer = buffer
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.dtype = dtype
        self.native: Any = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def is_contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def __repr__(self) -> str:
        return f"TensorArg(shape={self.shape}, strides={self.strides}, offset={self.offset}, dtype={self.dtype})"


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = [0] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)
    return tuple(strides)
