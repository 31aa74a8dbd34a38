"""Registers an op on behalf of the core (owner="rumus-core")."""

from rumus_contracts import OpRegistry, hookimpl

from ._common import schema


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(schema("impersonated_op"), owner="rumus-core")
