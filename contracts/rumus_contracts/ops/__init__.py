"""The op schemas RUMUS itself defines; plugins add theirs through `rumus_register_ops`."""

from __future__ import annotations

from ..schema import OpRegistry
from . import elementwise, fixed, linalg, memory, optim, reduction

MODULES = (elementwise, reduction, linalg, memory, optim, fixed)
from . import activation, indexing, nn  # noqa: E402  (issue 4: nn ops)
MODULES = (*MODULES, activation, indexing, nn)  # type: ignore[assignment]
from . import nn_conv, nn_norm, nn_pool  # noqa: E402  (issue 4: conv, pooling, normalization)
MODULES = (*MODULES, nn_conv, nn_pool, nn_norm)


def register_core_ops(registry: OpRegistry) -> None:
    for module in MODULES:
        module.register(registry)
