"""The fixed-point ops as functions: relu, requantize, linear (SPEC E)."""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from rumus_contracts import DTypeError, ShapeError, fixed_i16, int64
from rumus_contracts.ops.fixed import OVERFLOW, ROUNDING, requantize_int

from ..tensor import Tensor
from . import _ops
from .tensor import from_raw, require_fixed, scale_log2_of

__all__ = ["OVERFLOW", "ROUNDING", "linear", "relu", "requantize"]


def relu(t: Tensor) -> Tensor:
    """max(q, 0) on the raw values; the dtype (and so the scale) is kept."""
    require_fixed(t, "relu's input")
    return _ops.call("fixed_relu", t)


@overload
def requantize(acc: int, s: int) -> int: ...
@overload
def requantize(acc: Any, s: int) -> Tensor: ...


def requantize(acc: Any, s: int) -> Any:
    """int64 accumulator(s) -> int16, shifted by s with ROUNDING and OVERFLOW.

    A Python int gives an int (SPEC E's scalar form, exact for any size: the formula on Python ints);
    an int64 Tensor, an integer numpy array or a list gives a fixed_i16(s) tensor computed by the kernel.
    """
    fixed_i16(s)  # refuses s outside 0..15
    if isinstance(acc, (int, np.integer)) and not isinstance(acc, (bool, np.bool_)):
        return requantize_int(int(acc), s)
    if not isinstance(acc, Tensor):
        arr = np.asarray(acc)
        if arr.dtype.kind not in "iu" and arr.size:
            raise DTypeError(f"requantize takes integer accumulators, got {arr.dtype}")
        try:
            acc = from_raw(np.asarray(acc, dtype=np.int64), int64)
        except OverflowError:
            raise DTypeError("requantize: accumulators must fit in int64") from None
    if acc.dtype != int64:
        raise DTypeError(f"requantize takes an int64 accumulator tensor, got {acc.dtype}")
    return _ops.call("fixed_requantize", acc, scale_log2=s)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [..., in] with weight [in, out] (+ bias [out]), all of one scale -> [..., out].

    x may be 1-D ([in] -> [out]), 2-D with any strides, or N-D when it can be viewed as [-1, in].
    """
    s = scale_log2_of(weight)
    require_fixed(x, "the input", s)
    if x.ndim == 0:
        raise ShapeError("a fixed-point linear layer needs an input with at least one dim, got a 0-d tensor")
    flat = x if x.ndim == 2 else x.view(-1, x.shape[-1])
    if bias is None:
        out = _ops.call("fixed_linear_nobias", flat, weight, scale_log2=s)
    else:
        out = _ops.call("fixed_linear", flat, weight, bias, scale_log2=s)
    return out if x.ndim == 2 else out.view(*x.shape[:-1], weight.shape[1])
