"""torch.serialization's path: `save` and `load` (rumus.io's checkpoints; `load` also reads torch.save
files through a weights-only unpickler) and the names programs call beside them."""

from __future__ import annotations

from typing import Any

from .io import load, save

DEFAULT_PROTOCOL = 2


def add_safe_globals(safe_globals: list[Any]) -> None:
    """Refused: RUMUS's weights-only loader has a fixed allow-list (see docs/ARCHITECTURE.md on the .pt
    loader); a checkpoint that needs more globals loads with `load(f, weights_only=False)` from a source
    you trust."""
    from rumus_contracts import RumusError
    raise RumusError("rumus.serialization.add_safe_globals: the weights-only allow-list is fixed; load a trusted "
                     "file with rumus.load(f, weights_only=False)")


__all__ = ["DEFAULT_PROTOCOL", "add_safe_globals", "load", "save"]
