"""A kernel that takes one argument: the dispatcher calls kernel(outputs, inputs, attrs)."""

from rumus_contracts import KernelRegistry, OpRegistry, hookimpl

from ._common import schema


def kernel(x):  # type: ignore[no-untyped-def]
    return -x


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(schema("bad_signature_op"))


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    registry.register("bad_signature_op", "cpu", kernel)
