"""A namespace of accepted-and-kept flags for the torch.backends modules."""

from __future__ import annotations

from typing import Any


class Flags:
    """Attributes with torch's defaults; any attribute may be set and read back (it changes nothing)."""

    def __init__(self, **defaults: Any) -> None:
        self.__dict__.update(defaults)

    def __repr__(self) -> str:
        return f"Flags({', '.join(f'{k}={v!r}' for k, v in sorted(self.__dict__.items()))})"
