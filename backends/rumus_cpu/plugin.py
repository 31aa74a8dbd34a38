"""pluggy hooks of the CPU backend: the "cpu" backend factory and every CPU kernel.

Kernels live in modules named in KERNEL_MODULES, one idea per module; each exposes
``KERNELS: list[(op name, kernel, dtypes)]``. Adding a module is adding its name here.
"""

from __future__ import annotations

import importlib
import warnings

from rumus_contracts import BackendRegistry, Kernel, KernelRegistry, hookimpl

BACKEND = "cpu"
KERNEL_MODULES: tuple[str, ...] = (
    "kernels_elementwise",
    "kernels_reduce",
    "kernels_linalg",
    "kernels_memory",
    "kernels_optim",
    "kernels_fixed",
    "kernels_nn",
    "kernels_nn_conv", "kernels_nn_norm",
    "kernels_sort",
)


def kernel_entries() -> list[tuple[str, Kernel, tuple[object, ...]]]:
    """(op, kernel, dtypes) of every module in KERNEL_MODULES (imports the compiled kernels).

    Raises ImportError when the C extension is not built. A kernel module that fails to import is
    reported with a warning and skipped, so one broken module never hides the others' kernels.
    """
    importlib.import_module(f"{__package__}._lib")
    out = []
    for name in KERNEL_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except Exception as exc:
            warnings.warn(f"rumus_cpu: kernel module '{name}' failed to load and was skipped: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
            continue
        out.extend(module.KERNELS)
    return out


def kernel_table() -> dict[str, Kernel]:
    """op -> kernel (a later module's kernel for the same op wins, as in the registry)."""
    return {op: kernel for op, kernel, _ in kernel_entries()}


@hookimpl
def rumus_register_backends(registry: BackendRegistry) -> None:
    from .backend import create
    registry.register(BACKEND, create)


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    try:
        entries = kernel_entries()
    except ImportError:
        return  # not compiled: the backend factory reports it (BackendUnavailable) with the fix
    for op, kernel, dtypes in entries:
        registry.register(op, BACKEND, kernel, dtypes=dtypes)
