"""A second plugin overriding `neg` on CPU at the same priority 5 as override_kernel: ambiguous."""

from rumus_contracts import KernelRegistry, hookimpl

from ._common import negate_cpu


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    registry.register("neg", "cpu", negate_cpu, priority=5)
