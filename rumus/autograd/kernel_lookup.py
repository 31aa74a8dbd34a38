"""Whether a tensor's backend has a kernel for an op: backward formulas run a fused backward kernel where
one exists and compose core ops where not (formulas_table.py). Its own module, below the formula files,
so they import it without importing each other."""

from __future__ import annotations

from .. import _runtime
from ..tensor import Tensor

_fused_cache: dict[tuple[str, str, str], bool] = {}


def has_kernel(op: str, like: Tensor) -> bool:
    """Whether `like`'s backend has a kernel for `op` at `like`'s dtype (cached)."""
    backend = like._storage.backend
    key = (op, backend.name, like.dtype.name)
    hit = _fused_cache.get(key)
    if hit is None:
        hit = _fused_cache[key] = _runtime.plugins().kernels.find(op, backend.name, like.dtype) is not None
    return hit
