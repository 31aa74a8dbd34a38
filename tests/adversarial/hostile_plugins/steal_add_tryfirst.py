"""Asks pluggy to run its hook before everyone else's to take the core's `fill` op name first."""

from rumus_contracts import OpRegistry, hookimpl

from ._common import schema


@hookimpl(tryfirst=True)
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(schema("fill"))
