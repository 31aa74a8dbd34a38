"""What the decomposition families share: kernel-level op access, constants, in-place writes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from rumus_contracts import DType, IndexOutOfRange, bfloat16, float16, float32

from .. import _math
from .._creation import from_host
from .._dispatch import scalar_tensor
from .._tensor_base import Tensor
from ..ops import get as op

__all__ = ["arange_like", "const", "in_float32", "names_index_errors", "op", "reduce_dims", "total", "write"]

F = TypeVar("F", bound=Callable[..., Any])
_HALF = (float16, bfloat16)


def write(dst: Tensor, value: Tensor) -> None:
    """dst's elements := value (cast to dst's dtype, broadcast to its shape), bumping dst's version: the
    in-place write of an in-place op's decomposition (which runs without recording, as its kernel does)."""
    if value.dtype != dst.dtype:
        value = _math.cast(value, dst.dtype)
    _math.copy_into(dst, value)


def const(value: Any, like: Tensor, dtype: DType | None = None) -> Tensor:
    """A 0-d constant of like's dtype (or `dtype`) on like's device."""
    return scalar_tensor(value, dtype or like.dtype, like._storage.device)


def arange_like(n: int, like: Tensor, dtype: DType) -> Tensor:
    """0..n-1 on like's device: uploaded, not computed (there is no arange kernel to rely on)."""
    return from_host(np.arange(n, dtype=np.int64).astype(dtype.numpy), dtype, like._storage.device)


def reduce_dims(ndim: int, dims: Sequence[int] | None = None) -> tuple[int, ...]:
    """dims as a kernel-level reduction takes them (sorted); None: all of an ndim tensor's dims."""
    return tuple(range(ndim)) if dims is None else tuple(sorted(int(d) for d in dims))


def total(x: Tensor) -> Tensor:
    """The sum of every element, keepdim shape (a 0-d tensor sums to itself)."""
    return op("sum")(x, dims=reduce_dims(x.ndim))


def in_float32(fn: F) -> F:
    """Run a decomposition of float16/bfloat16 inputs in float32 and round its results once, as the
    kernels do: a chain of ops each rounding to float16 drifts past the op's tolerance (softmax's sums,
    cross-entropy's logsumexp, a derivative of several terms)."""
    @functools.wraps(fn)
    def run(*tensors: Tensor, **attrs: Any) -> Any:
        half = next((t.dtype for t in tensors if t.dtype in _HALF), None)
        if half is None:
            return fn(*tensors, **attrs)
        res = fn(*[_math.cast(t, float32) if t.dtype == half else t for t in tensors], **attrs)
        if isinstance(res, tuple):
            return tuple(_math.cast(r, half) if r.dtype == float32 else r for r in res)
        return _math.cast(res, half) if res.dtype == float32 else res
    return run  # type: ignore[return-value]


def names_index_errors(name: str) -> Callable[[F], F]:
    """An index out of range found by the primitive inside (gather, scatter_add) is reported as the op's."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*tensors: Tensor, **attrs: Any) -> Any:
            try:
                return fn(*tensors, **attrs)
            except IndexOutOfRange as exc:
                if str(exc).startswith(f"{name}:"):
                    raise
                raise IndexOutOfRange(f"{name}: {exc}") from None
        return run  # type: ignore[return-value]
    return wrap
