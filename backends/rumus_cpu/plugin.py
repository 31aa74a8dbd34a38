"""pluggy hooks of the CPU backend: the "cpu" backend factory and every CPU kernel.

Kernels live in modules named in KERNEL_MODULES, one idea per module; each exposes
``KERNELS: list[(op name, kernel, dtypes)]``. Adding a module is adding its name here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from rumus_contracts import BackendRegistry, DType, Kernel, KernelRegistry, hookimpl

BACKEND = "cpu"
KERNEL_MODULES: tuple[str, ...] = (
    "kernels_elementwise",
    "kernels_reduce",
    "kernels_linalg",
    "kernels_memory",
    "kernels_optim",
    "kernels_fixed",
    "kernels_quant",
    "kernels_nn",
    "kernels_nn_conv", "kernels_nn_norm",
    "kernels_attention", "kernels_row_ops", "kernels_cross_entropy", "kernels_rnn",
    "kernels_sort", "kernels_scan",
    "kernels_amp",
    "kernels_half_widened",
)


def _raise(what: str, exc: Exception) -> None:
    raise exc


def kernel_entries(on_failure: Callable[[str, Exception], None] = _raise,
                   ) -> list[tuple[str, Kernel, tuple[DType, ...] | None]]:
    """(op, kernel, dtypes) of every module in KERNEL_MODULES (imports the compiled kernels).

    Raises ImportError when the C extension is not built or is stale. A kernel module that fails to
    import goes to `on_failure(module name, error)` (default: raise); the plugin hook reports it with
    `registry.report_failure` and keeps the other modules' kernels, so one broken module never hides
    the others, and never passes unnoticed either (the conformance run fails on it).
    """
    importlib.import_module(f"{__package__}._lib")
    out = []
    for name in KERNEL_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except Exception as exc:
            on_failure(f"kernel module rumus_cpu.{name}", exc)
            continue
        out.extend(module.KERNELS)
    return out


def kernel_table() -> dict[str, Kernel]:
    """op -> kernel (a later module's kernel for the same op wins, as in the registry)."""
    return {op: kernel for op, kernel, _ in kernel_entries(on_failure=lambda what, exc: None)}


@hookimpl
def rumus_register_backends(registry: BackendRegistry) -> None:
    from .backend import create
    from .threads import quiet_openmp_for_later_libraries
    registry.register(BACKEND, create)
    # Before any other plugin's kernels hook: a plugin's OpenMP extension (rumus_graph's, rumus_vision's)
    # loaded first would give libgomp, and torch imported later, its long default spin. It only loads a
    # library (GOMP_SPINCOUNT is set for that load and restored); the malloc and OpenBLAS changes wait for
    # the backend's creation.
    quiet_openmp_for_later_libraries()


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    try:
        entries = kernel_entries(on_failure=registry.report_failure)
    except Exception as exc:  # ImportError, or whatever a stale-build check raises
        # not compiled, or stale: the backend factory refuses to start with the fix in its message;
        # reported here too, so a strict run (conformance) fails instead of counting skipped ops
        registry.report_failure("C kernels (rumus_cpu._lib)", exc)
        return
    for op, kernel, dtypes in entries:
        registry.register(op, BACKEND, kernel, dtypes=dtypes)
