"""Registers an op named like the core's `add` (and one new op): issue 20 item 5's plugin."""

from rumus_contracts import OpRegistry, hookimpl

from ._common import schema


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(schema("steal_add_extra"))
    registry.register(schema("add"))
