"""RemovableHandle: what register_*_hook returns (torch.utils.hooks.RemovableHandle's name and use)."""

from __future__ import annotations

import itertools
from collections.abc import MutableMapping
from typing import Any

_ids = itertools.count()


class RemovableHandle:
    """`handle.remove()` takes the hook out again; usable as a context manager."""

    def __init__(self, table: MutableMapping[int, Any]) -> None:
        self.id = next(_ids)
        self._table = table

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
