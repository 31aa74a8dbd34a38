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
from rumus_contracts.ops.nn import dropout_keep
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


# ---- selection -----------------------------------------------------------------------------------

def where(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    c, a, b = inputs
    strided_view(outputs[0])[...] = np.where(strided_view(c), strided_view(a), strided_view(b))


def clamp(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    (o,), (x,) = outputs, inputs
    lo, hi = attrs.get("min"), attrs.get("max")
    v = strided_view(x)
    if x.dtype.is_integer:  # the bounds truncate toward zero and stay inside the dtype (a C cast of the result)
        info = np.iinfo(v.dtype)
        lo = None if lo is None else int(min(max(np.trunc(lo), info.min), info.max))
        hi = None if hi is None else int(min(max(np.trunc(hi), info.min), info.max))
    else:
        v = _in(x)
    if lo is not None:
        v = np.maximum(v, np.asarray(lo, v.dtype))  # NaN propagates, as in PyTorch
    if hi is not None:
        v = np.minimum(v, np.asarray(hi, v.dtype))
    strided_view(o)[...] = v


# ---- reductions (outputs have the keepdim shape) --------------------------------------------------

def _reduction(fn: Any, accumulate: bool) -> Kernel:
    def kernel(outputs: Args, inputs: Args, attrs: Attrs) -> None:
        (o,), (x,) = outputs, inputs
        dims = tuple(attrs["dims"])
        v = _in(x)
        dtype = (np.float64 if x.dtype.is_floating else np.int64) if accumulate else None
        strided_view(o)[...] = fn(v, axis=dims, keepdims=True, **({"dtype": dtype} if dtype else {}))
    return kernel


def _arg_reduction(fn: Any) -> Kernel:
    def kernel(outputs: Args, inputs: Args, attrs: Attrs) -> None:
        (o,), (x,) = outputs, inputs
        v = strided_view(x)
        strided_view(o)[...] = 0 if v.ndim == 0 else np.expand_dims(fn(v, axis=int(attrs["dim"])), int(attrs["dim"]))
    return kernel


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

def index_select(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    x, index = inputs
    dim = int(attrs["dim"])
    idx = _indices("index_select", index, x.shape[dim], dim).reshape(-1)
    strided_view(outputs[0])[...] = np.take(strided_view(x), idx, axis=dim)


def index_add(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    x, index, source = inputs
    dim = int(attrs["dim"])
    idx = _indices("index_add", index, x.shape[dim], dim).reshape(-1)
    out = np.moveaxis(_in(x).copy(), dim, 0)
    np.add.at(out, idx, np.moveaxis(_in(source), dim, 0) * float(attrs["alpha"]))  # repeats add up
    strided_view(outputs[0])[...] = np.moveaxis(out, 0, dim)


def embedding(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    weight, indices = inputs
    strided_view(outputs[0])[...] = strided_view(weight)[_indices("embedding", indices, weight.shape[0], 0)]


def embedding_backward(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    o = outputs[0]
    grad, indices = inputs
    out = np.zeros(o.shape)
    idx = _indices("embedding_backward", indices, o.shape[0], 0).reshape(-1)
    np.add.at(out, idx, _in(grad).reshape(-1, o.shape[1]))
    if attrs["padding_idx"] is not None:
        out[int(attrs["padding_idx"])] = 0.0
    strided_view(o)[...] = out


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


# ---- randomness ----------------------------------------------------------------------------------------

def dropout(outputs: Args, inputs: Args, attrs: Attrs) -> None:
    (o,), (x,) = outputs, inputs  # the keep mask is the contract's counter-based hash, so every backend agrees
    p = float(attrs["p"])
    keep = dropout_keep(x.numel, p, int(attrs["seed"]), int(attrs["offset"])).reshape(x.shape)
    strided_view(o)[...] = np.where(keep, _in(x) * (1.0 / (1.0 - p)), 0.0)


# op -> kernel. Registered for every dtype the backend holds: an op's schema decides which of them it has.
KERNELS: dict[str, Kernel] = {
    "where": where, "clamp": clamp,
    "sum": _reduction(np.sum, True), "prod": _reduction(np.prod, True),
    "amax": _reduction(np.max, False), "amin": _reduction(np.min, False),
    "argmax": _arg_reduction(np.argmax), "argmin": _arg_reduction(np.argmin), "argsort": argsort,
    "matmul": matmul, "copy": copy, "fill": fill,
    "index_select": index_select, "index_add": index_add, "embedding": embedding,
    "embedding_backward": embedding_backward, "gather": gather, "scatter_add": scatter_add, "dropout": dropout,
}
