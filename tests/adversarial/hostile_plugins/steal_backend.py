"""Registers a backend named "cpu" to replace the built-in one."""

from rumus_contracts import BackendRegistry, hookimpl


@hookimpl
def rumus_register_backends(registry: BackendRegistry) -> None:
    registry.register("cpu", lambda: object())
