"""The hooks a RUMUS plugin implements (entry-point group `rumus`).

A plugin is any importable module (or object) with functions named like the specs below and marked
with `rumus_contracts.hookimpl`, declared as an entry point of group `rumus`:

    [project.entry-points.rumus]
    myplugin = "my_package.plugin"

Each hook is called once per plugin at load time, in this order: backends, ops, kernels (so kernels
may refer to ops and backends registered by any plugin); within a hook the core goes first, then the
built-in backends, then third-party plugins by name. What a plugin must and must not do:

- Importing the plugin module must be cheap and side-effect free: no hardware, no threads, no
  network, no changes to global state. Heavy work goes in the backend factory, which runs on first use.
- Register only through the `registry` argument; registrations are stamped with the plugin's name.
- A plugin that raises (any exception, SystemExit included) in its import or a hook is skipped, and
  everything it registered is removed; `rumus info` shows why, and `rumus conformance` fails.
  A plugin that wants to keep working when a part of it breaks (one kernel module of many) reports
  that part from its kernels hook with ``registry.report_failure(what, exc)`` instead of warning and
  carrying on; the conformance run then fails too.
- KeyboardInterrupt is not contained (it may be the user's Ctrl-C); see rumus_contracts.plugins.
- Hook wrappers and a hook function whose name matches no spec below are refused.
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
    conformance suite covers it with no extra code. At load the shape and dtype rules run on the op's
    first samples; a rule that raises or answers nonsense refuses the plugin, naming it.
    A differentiable op defined outside the core gives ``backward``: ``fn(ctx, *grad_outputs) -> tuple
    of input grads`` over rumus tensors, where ``ctx.inputs``, ``ctx.outputs`` and ``ctx.attrs`` hold
    what the forward saw.
    An op name belongs to whoever registers it first, and the core registers first: registering an
    existing name (e.g. ``add``) is refused, naming both owners, and the plugin is skipped.
    """


@hookspec
def rumus_register_kernels(registry: KernelRegistry) -> None:
    """Register kernels with ``registry.register(op, backend_name, kernel, dtypes=None, priority=0)``.

    A kernel is ``kernel(outputs, inputs, attrs) -> None`` over :class:`TensorArg` values: it writes
    into the preallocated outputs and must honour input strides and offsets. For GPU backends a
    kernel may instead be a :class:`ShaderKernel` (WGSL source + entry point + dispatch rule), which
    the backend turns into a callable in ``Backend.adapt_kernel``. ``dtypes=None`` claims every dtype
    of the op schema that the backend holds (``capabilities().dtypes``); packed dtypes (q8, int4,
    fixed_i16) only when named. Claiming a dtype the op does not have, or a kernel for an unknown op,
    is refused at load.

    Which kernel runs is decided by ``priority``, never by load order: the highest priority claiming
    (op, backend, dtype) wins. Built-in backends register at 0. To replace a built-in kernel a plugin
    passes ``priority=1`` (or higher) explicitly; the same (op, backend, dtype) at the same priority
    from two plugins is refused, naming both.
    """
