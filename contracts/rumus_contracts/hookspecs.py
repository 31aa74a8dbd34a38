"""The hooks a RUMUS plugin implements (entry-point group `rumus`).

A plugin is any importable module (or object) with functions named like the specs below and marked
with `rumus_contracts.hookimpl`. Each hook is called once per plugin at load time, in this order:
backends, ops, kernels, so kernels may refer to ops and backends registered by any plugin.
"""

from __future__ import annotations

import pluggy

from .registry import BackendRegistry, KernelRegistry
from .schema import OpRegistry

PROJECT = "rumus"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def rumus_register_backends(registry: BackendRegistry) -> None:
    """Register backend factories with ``registry.register(name, factory)``.

    The factory is called lazily, the first time the backend is used. It must return an object
    satisfying :class:`rumus_contracts.Backend`, or raise :class:`BackendUnavailable` with a reason
    a user can act on (e.g. "no Vulkan adapter found"). Importing the plugin module must not touch
    hardware.
    """


@hookspec
def rumus_register_ops(registry: OpRegistry) -> None:
    """Register new op schemas with ``registry.register(OpSchema(...))``.

    Every op needs a shape rule, a dtype rule, a float64 ``reference`` and ``samples``, so the
    conformance suite covers it with no extra code. A differentiable op defined outside the core
    gives ``backward``: ``fn(ctx, *grad_outputs) -> tuple of input grads`` over rumus tensors,
    where ``ctx.inputs``, ``ctx.outputs`` and ``ctx.attrs`` hold what the forward saw.
    Registering a name twice is an error naming both owners.
    """


@hookspec
def rumus_register_kernels(registry: KernelRegistry) -> None:
    """Register kernels with ``registry.register(op, backend_name, kernel, dtypes=None)``.

    A kernel is ``kernel(outputs, inputs, attrs) -> None`` over :class:`TensorArg` values: it writes
    into the preallocated outputs and must honour input strides and offsets. For GPU backends a
    kernel may instead be a :class:`ShaderKernel` (WGSL source + entry point + dispatch rule).
    ``dtypes=None`` claims every dtype the op schema allows. A later registration for the same
    (op, backend) wins, so a plugin can replace a built-in kernel.
    """
