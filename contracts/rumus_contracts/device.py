"""Where a tensor lives: a backend name and an index, spelled "cpu", "wgpu:0"."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import RumusError


@dataclass(frozen=True, slots=True)
class Device:
    backend: str
    index: int = 0

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Device):
            return NotImplemented
        return self.backend == other.backend and self.index == other.index

    def __hash__(self) -> int:
        return hash(self.backend) ^ self.index

    def __str__(self) -> str:
        return self.backend if self.backend == "cpu" and self.index == 0 else f"{self.backend}:{self.index}"

    def __repr__(self) -> str:
        return f"device('{self}')"

    @staticmethod
    def parse(spec: str | Device) -> Device:
        if isinstance(spec, Device):
            return spec
        if not isinstance(spec, str) or not spec:
            raise RumusError(f"a device is spelled like 'cpu' or 'wgpu:0', got {spec!r}")
        name, _, idx = spec.partition(":")
        if idx and not idx.isdigit():
            raise RumusError(f"bad device index in {spec!r}; write e.g. 'wgpu:0'")
        return Device(name, int(idx) if idx else 0)
