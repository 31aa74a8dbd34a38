"""The plugin module named by the entry point: RUMUS calls these hooks when it loads the plugin.

Importing this module must stay cheap (no kernels are built, no backend is created): the backend
factory runs on first use, the kernels are built when the kernels hook runs.
"""

from __future__ import annotations

from rumus_contracts import BackendRegistry, KernelRegistry, hookimpl

from .backend import DTYPES, NAME, create


@hookimpl
def rumus_register_backends(registry: BackendRegistry) -> None:
    registry.register(NAME, create)


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    from rumus_contracts.kit import table_kernels
    from rumus_contracts.ops.expressions import EXPRESSIONS

    from .kernels import KERNELS

    # every elementwise primitive (the table's forward ops), from the expression table; the table's fused
    # backward ops are no primitives (the core decomposes them), so they are left out
    for op, kernel, dtypes in table_kernels(DTYPES, ops=EXPRESSIONS):
        registry.register(op, NAME, kernel, dtypes=dtypes)
    for op, kernel in KERNELS.items():  # the other primitives, written by hand
        registry.register(op, NAME, kernel, dtypes=DTYPES)
