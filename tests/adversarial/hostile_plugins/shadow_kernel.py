"""Registers its own CPU kernel for the core's `neg` at the default priority: a silent takeover."""

from rumus_contracts import KernelRegistry, hookimpl

from ._common import negate_cpu


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    registry.register("neg", "cpu", negate_cpu)
