"""A documented override: its CPU kernel for `neg` asks for priority 5, above the built-in 0."""

from rumus_contracts import KernelRegistry, hookimpl

from ._common import negate_cpu


def negate_override(outputs, inputs, attrs):  # type: ignore[no-untyped-def]
    negate_cpu(outputs, inputs, attrs)


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    registry.register("neg", "cpu", negate_override, priority=5)
