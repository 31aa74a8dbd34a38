"""Misspells a hook name (rumus_register_kernel): would otherwise be ignored without a word."""

from rumus_contracts import hookimpl

from ._common import negate_cpu


@hookimpl
def rumus_register_kernel(registry):  # type: ignore[no-untyped-def]
    registry.register("neg", "cpu", negate_cpu, priority=9)
