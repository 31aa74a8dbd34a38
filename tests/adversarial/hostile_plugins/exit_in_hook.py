"""Registers a good op, then SystemExit in its kernel hook: the op must be rolled back too."""

import sys

from rumus_contracts import KernelRegistry, OpRegistry, hookimpl

from ._common import schema


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(schema("exit_in_hook_op"))


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    sys.exit("bye")
