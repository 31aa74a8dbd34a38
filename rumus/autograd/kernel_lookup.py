"""Whether a tensor's backend has a kernel for an op: backward formulas run a fused backward kernel where
one exists and compose core ops where not (formulas_table.py). Its own module, below the formula files,
so they import it without importing each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


# (op, backend, dtype) -> the `applies` tests of that op's conditional kernels there (usually none)
_conditions: dict[tuple[str, str, str], tuple[Any, ...]] = {}


def conditional_kernel_takes(op: str, like: Tensor, shapes: Sequence[tuple[int, ...]],
                             attrs: Mapping[str, Any]) -> bool:
    """Whether a conditional kernel of `op` (a plugin's, registered with `applies=`) would run this call on
    `like`'s backend: a fused op that replaces `op` must not take such calls away from it."""
    storage = like._storage
    key = (op, storage.backend.name, storage.dtype.name)
    tests = _conditions.get(key)
    if tests is None:
        entries = _runtime.plugins().kernels.candidates(op, storage.backend.name, storage.dtype)
        tests = _conditions[key] = tuple(e.applies for e in entries if e.applies is not None)
    return any(applies(shapes, attrs) for applies in tests) if tests else False
