"""Run code as if the cpu backend had no kernel for some ops: the dispatcher then takes their
decompositions (a backend made of the primitives alone, without writing one). For tests only: it
reaches into the process's kernel registry and the dispatcher's caches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from rumus import _runtime, backend_api, ops
from rumus.autograd import kernel_lookup
from rumus_contracts import PRIMITIVES
from rumus_contracts.primitives import PACKED_DTYPE_OPS


def _forget_kernel_choices() -> None:
    """Drop every cached kernel decision, so the next call of each op looks its kernel up again."""
    _runtime._kernel_cache.clear()
    backend_api.plugins().kernels._cache.clear()
    kernel_lookup._fused_cache.clear()
    kernel_lookup._conditions.clear()
    for op in list(ops._ops.values()):
        op._kernels.clear()
        op._plans.clear()
        op._fused.clear()
    from rumus.nn import _functional_attention, functional_norm
    functional_norm._FUSED.clear()
    _functional_attention._HAS_FLASH.clear()


@contextmanager
def hidden_kernels(names: Iterable[str], backend: str = "cpu") -> Iterator[None]:
    """Inside the block `backend` has no kernel for the ops `names`."""
    entries = backend_api.plugins().kernels._entries
    saved = {(n, backend): entries.pop((n, backend)) for n in set(names) if (n, backend) in entries}
    _forget_kernel_choices()
    try:
        yield
    finally:
        entries.update(saved)
        _forget_kernel_choices()


@contextmanager
def only_primitives(backend: str = "cpu", keep: Iterable[str] = ()) -> Iterator[None]:
    """Inside the block `backend` has kernels for the primitives (rumus_contracts.PRIMITIVES), the packed
    dtypes' own ops (a backend holding those dtypes provides them) and `keep`, and for nothing else."""
    kept = PRIMITIVES | PACKED_DTYPE_OPS | set(keep)
    with hidden_kernels([n for n in backend_api.plugins().ops.names() if n not in kept], backend):
        yield
