"""The op schemas RUMUS itself defines; plugins add theirs through `rumus_register_ops`."""

from __future__ import annotations

from ..schema import OpRegistry
from . import elementwise, fixed, linalg, memory, optim, reduction

MODULES = (elementwise, reduction, linalg, memory, optim, fixed)


def register_core_ops(registry: OpRegistry) -> None:
    for module in MODULES:
        module.register(registry)
