"""Storage: one backend buffer, its device and dtype, and the version counter in-place ops bump."""

from __future__ import annotations

from typing import Any

from rumus_contracts import Backend, Device, DType


class Storage:
    __slots__ = ("buffer", "device", "dtype", "backend", "numel", "version", "__weakref__")

    def __init__(self, buffer: Any, device: Device, dtype: DType, backend: Backend, numel: int) -> None:
        self.buffer = buffer
        self.device = device
        self.dtype = dtype
        self.backend = backend
        self.numel = numel
        self.version = 0
