"""The hand-written primitives: every primitive op that is not in the elementwise expression table.

A kernel is ``kernel(outputs, inputs, attrs) -> None``: it reads the input TensorArgs, writes into the
preallocated outputs, and must honour strides and offsets (``strided_view`` does). Attributes arrive
bound by the op's schema (defaults filled in, dims normalised to sorted non-negative ints). Floating
results are computed in float64 and rounded once, into the output: this backend is a reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import IndexOutOfRange, Kernel, TensorArg
from rumus_contracts.kit import compute_dtype, convert, strided_view
from rumus_contracts.ops.sorting import stable_argsort

Args = Sequence[TensorArg]
Attrs = Mapping[str, Any]
Array = np.ndarray[Any, Any]


def _in(arg: TensorArg) -> Array:
    """An input's values in the dtype this backend computes it in (float64 for floats)."""
    return strided_view(arg).astype(compute_dtype(arg.dtype), copy=False)


def _indices(op: str, arg: TensorArg, size: int, dim: int) -> Array:
    """int64 indices, each checked to lie in 0..size-1 (a bad one raises, naming it)."""
    idx = strided_view(arg).astype(np.int64, copy=False)
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        raise IndexOutOfRange(f"{op}: index {int(bad.flat[0])} is out of range for dim {dim} of size {size} "
                              f"(valid indices are 0..{size - 1})")
    return idx


def where(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    c, a, b = inputs
    strided_view(outputs[0])[...] = np.where(strided_view(c), strided_view(a), strided_view(b))


# ---- reductions (outputs have the keepdim shape) --------------------------------------------------

def sum_(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    (o,), (x,) = outputs, inputs  # floats accumulate in float64, integers in int64 (the schema's result dtype)
    acc = np.float64 if x.dtype.is_floating else np.int64
    strided_view(o)[...] = np.sum(strided_view(x), axis=tuple(attrs["dims"]), keepdims=True, dtype=acc)


def amax(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    (o,), (x,) = outputs, inputs  # NaN propagates; the schema refuses an empty reduced dim
    strided_view(o)[...] = np.max(strided_view(x), axis=tuple(attrs["dims"]), keepdims=True)


def argsort(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    strided_view(outputs[0])[...] = stable_argsort(strided_view(inputs[0]), int(attrs["dim"]),
                                                   bool(attrs["descending"]))


# ---- linear algebra --------------------------------------------------------------------------------

def matmul(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    a, b = inputs  # [..., n, k] @ [..., k, m]; batch dims broadcast; BLAS in the operands' own dtype
    strided_view(outputs[0])[...] = np.matmul(strided_view(a), strided_view(b))


# ---- data movement ---------------------------------------------------------------------------------

def copy(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    (o,), (x,) = outputs, inputs  # the output may be a strided view (slice assignment, cat)
    strided_view(o)[...] = convert(strided_view(x), o.dtype)


def fill(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    o = outputs[0]
    strided_view(o)[...] = convert(np.asarray(attrs["value"]), o.dtype)


# ---- indexing ----------------------------------------------------------------------------------------

def _gather_index(op: str, x: TensorArg, index: TensorArg, dim: int) -> tuple[Array, ...]:
    """numpy fancy indices for x[..., index[...], ...] along dim, the other dims running over index's shape."""
    idx = _indices(op, index, x.shape[dim], dim)
    grids: list[Array] = list(np.indices(idx.shape, sparse=True))
    grids[dim] = idx
    return tuple(grids)


def gather(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    x, index = inputs
    if not x.shape:  # a 0-d gather picks the one element
        strided_view(outputs[0])[...] = strided_view(x)
        return
    strided_view(outputs[0])[...] = strided_view(x)[_gather_index("gather", x, index, int(attrs["dim"]))]


def scatter_add(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    x, index, src = inputs
    out = _in(x).copy()
    if not x.shape:
        out = out + _in(src)
    else:
        np.add.at(out, _gather_index("scatter_add", x, index, int(attrs["dim"])), _in(src))
    strided_view(outputs[0])[...] = out


# op -> kernel: the primitives outside the expression table (rumus_contracts.PRIMITIVES). Registered for
# every dtype the backend holds: an op's schema decides which of them it has.
KERNELS: dict[str, Kernel] = {
    "where": where, "sum": sum_, "amax": amax, "argsort": argsort,
    "matmul": matmul, "copy": copy, "fill": fill, "gather": gather, "scatter_add": scatter_add,
}
