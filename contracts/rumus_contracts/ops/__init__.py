"""The op schemas RUMUS itself defines; plugins add theirs through `rumus_register_ops`."""

from __future__ import annotations

from types import ModuleType

from ..schema import OpRegistry
from . import (
    activation, elementwise, fixed, indexing, linalg, memory, nn, nn_conv, nn_norm, nn_pool, optim, quant, reduction,
)

MODULES: tuple[ModuleType, ...] = (
    elementwise, reduction, linalg, memory, optim,  # the foundation
    fixed,  # fixed-point i16 engine
    quant,  # q8 blocks and int4 groups (SPEC C, D)
    activation, indexing, nn,  # nn stack: activations, embedding/gather, dropout, losses, attention
    nn_conv, nn_pool, nn_norm,  # nn stack: convolution, pooling, normalization
)


def register_core_ops(registry: OpRegistry) -> None:
    for module in MODULES:
        module.register(registry)
