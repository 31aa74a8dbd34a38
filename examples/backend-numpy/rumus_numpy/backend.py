"""NumpyBackend: the allocator half of a backend. Buffers are 1-D numpy arrays in host memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import (
    Capabilities, Device, DType, Kernel, TensorArg, bool_, float32, float64, int8, int32, int64, uint8,
)
from rumus_contracts.backend import callable_kernel
from rumus_contracts.kit import convert, host_copy, strided_view

NAME = "numpy"
DEVICE = Device(NAME, 0)
# What the buffers really hold. float16 and bfloat16 are left out on purpose: the core's decompositions
# would round every intermediate step to half precision (a half backend computes in float32 and rounds
# once per op, as rumus_cpu does); packed dtypes (q8, int4, fixed_i16) need their own kernels.
DTYPES: tuple[DType, ...] = (float32, float64, int64, int32, int8, uint8, bool_)


class NumpyBackend:
    """The "numpy" backend: what the core asks of every backend (rumus_contracts.Backend)."""

    name = NAME

    def devices(self) -> list[Device]:
        return [DEVICE]

    def allocate(self, device: Device, numel: int, dtype: DType) -> np.ndarray[Any, Any]:
        return np.empty(numel, dtype.numpy)  # uninitialised, as the protocol allows

    def from_numpy(self, device: Device, array: np.ndarray[Any, Any], dtype: DType) -> np.ndarray[Any, Any]:
        return np.array(array, dtype=dtype.numpy, order="C", copy=True).reshape(-1)

    def to_numpy(self, arg: TensorArg) -> np.ndarray[Any, Any]:
        return host_copy(arg)  # a backend with a device would copy device -> host here (and wait for it)

    def copy_(self, dst: TensorArg, src: TensorArg) -> None:
        strided_view(dst)[...] = convert(strided_view(src), dst.dtype)  # numpy buffers overlapping views

    def synchronize(self, device: Device) -> None:
        return None  # every kernel has finished when it returns: nothing is queued

    def capabilities(self, device: Device) -> Capabilities:
        return Capabilities(dtypes=DTYPES,
                            description="host numpy arrays; scope: the primitive ops only (a reference backend)")

    def adapt_kernel(self, kernel: Kernel) -> Kernel:
        return callable_kernel(self.name, kernel)  # Python callables run as they are; no shaders here


def create() -> NumpyBackend:
    """The factory the plugin registers: called on first use, never at import."""
    return NumpyBackend()
