"""Neural-network kernels: counter-based dropout and the integer-indexed ops (embedding,
index_select/index_add, gather/scatter_add). Activations are expression-table ops (kernels_elementwise).

The indexed ops take contiguous operands (their schemas say which), except gather's and scatter_add's x,
which may be strided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, IndexOutOfRange, Kernel, ShapeError, TensorArg, contiguous_strides
from rumus_contracts.kit import strided_view as _view  # numpy view of a TensorArg (size-0 dims included)

from ._lib import ffi, lib
from .dtypes import ALL, FLOAT, HALF
from .widen import widened_to_float32

_from_buffer = ffi.from_buffer

# ---- helpers for the indexed ops ---------------------------------------------------------------------

def _ptr(arg: TensorArg, ctype: str = "char *") -> Any:
    """Pointer to arg's first element (its offset applied)."""
    return ffi.cast(ctype, _from_buffer(arg.buffer)) + arg.offset if ctype != "char *" else \
        ffi.cast("char *", _from_buffer(arg.buffer)) + arg.offset * arg.buffer.itemsize


def _idx64(arg: TensorArg) -> int:
    return 1 if arg.dtype.name == "int64" else 0


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _out_of_range(op: str, index: TensorArg, pos: int, size: int, dim: int) -> ShapeError:
    value = int(_view(index).reshape(-1)[pos])
    return IndexOutOfRange(f"{op}: index {value} is out of range for dim {dim} of size {size} "
                      f"(valid indices are 0..{size - 1})")


def _checked(op: str, index: TensorArg, size: int, dim: int) -> None:
    bad = lib.rumus_index_check(_ptr(index), _idx64(index), index.numel, size)
    if bad >= 0:
        raise _out_of_range(op, index, bad, size, dim)


def _accumulate(out: TensorArg, src: TensorArg, index: TensorArg, outer: int, n: int, k: int, inner: int,
                alpha: float, skip_row: int) -> None:
    fn = lib.rumus_index_add_f32 if out.dtype.name == "float32" else lib.rumus_index_add_f64
    ctype = "float *" if out.dtype.name == "float32" else "double *"
    fn(_ptr(out, ctype), _ptr(src, ctype), _ptr(index), _idx64(index), outer, n, k, inner, alpha, skip_row)


# ---- embedding ----------------------------------------------------------------------------------------

def embedding(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o = outputs[0]
    w, idx = inputs
    if o.numel == 0:
        if idx.numel:
            _checked("embedding", idx, w.shape[0], 0)
        return
    _checked("embedding", idx, w.shape[0], 0)
    lib.rumus_index_select(_ptr(o), _ptr(w), _ptr(idx), _idx64(idx), 1, w.shape[0], idx.numel,
                           w.shape[1] * w.buffer.itemsize)


def embedding_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o = outputs[0]
    g, idx = inputs
    out = _view(o)
    out[...] = 0
    if idx.numel:
        _checked("embedding_backward", idx, o.shape[0], 0)
    if o.numel == 0 or idx.numel == 0:
        return
    pad = attrs.get("padding_idx")
    _accumulate(o, g, idx, 1, o.shape[0], idx.numel, o.shape[1], 1.0, -1 if pad is None else int(pad))


# ---- index_select / index_add ---------------------------------------------------------------------------

def _split(shape: Sequence[int], dim: int) -> tuple[int, int, int]:
    return _prod(shape[:dim]), shape[dim], _prod(shape[dim + 1:])


def index_select(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o = outputs[0]
    x, idx = inputs
    dim = int(attrs["dim"])
    outer, n, inner = _split(x.shape, dim)
    if idx.numel:
        _checked("index_select", idx, n, dim)
    if o.numel == 0:
        return
    lib.rumus_index_select(_ptr(o), _ptr(x), _ptr(idx), _idx64(idx), outer, n, idx.numel, inner * x.buffer.itemsize)


def index_add(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o = outputs[0]
    x, idx, src = inputs
    dim = int(attrs["dim"])
    outer, n, inner = _split(x.shape, dim)
    if idx.numel:
        _checked("index_add", idx, n, dim)
    _view(o)[...] = _view(x)
    if o.numel == 0 or src.numel == 0:
        return
    _accumulate(o, src, idx, outer, n, idx.numel, inner, float(attrs.get("alpha", 1.0)), -1)


# ---- gather / scatter_add ---------------------------------------------------------------------------------

def _walk_args(index: TensorArg, strides: Sequence[int], dim: int) -> tuple[int, Any, Any, int]:
    """(ndim, shape, strides, dim) for the C odometer; a 0-d op runs as 1-d of size 1."""
    if not index.shape:
        return 1, ffi.new("int64_t[]", [1]), ffi.new("int64_t[]", [0]), 0
    return len(index.shape), ffi.new("int64_t[]", list(index.shape)), ffi.new("int64_t[]", list(strides)), dim


def gather(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o = outputs[0]
    x, idx = inputs
    if o.numel == 0:
        return
    dim = int(attrs["dim"])
    size = x.shape[dim] if x.shape else 1
    ndim, shape, strides, d = _walk_args(idx, x.strides, dim)
    bad = lib.rumus_gather(_ptr(o), _ptr(x), _ptr(idx), _idx64(idx), x.buffer.itemsize, ndim, shape, strides, d, size)
    if bad >= 0:
        raise _out_of_range("gather", idx, bad, size, dim)


def scatter_add(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o = outputs[0]
    x, idx, src = inputs
    _view(o)[...] = _view(x)
    if idx.numel == 0:
        return
    dim = int(attrs["dim"])
    size = x.shape[dim] if x.shape else 1
    ndim, shape, strides, d = _walk_args(idx, contiguous_strides(o.shape), dim)
    f32 = o.dtype.name == "float32"
    ctype = "float *" if f32 else "double *"
    fn = lib.rumus_scatter_add_f32 if f32 else lib.rumus_scatter_add_f64
    bad = fn(_ptr(o, ctype), _ptr(src, ctype), _ptr(idx), _idx64(idx), ndim, shape, strides, d, size)
    if bad >= 0:
        raise _out_of_range("scatter_add", idx, bad, size, dim)


# ---- dropout ---------------------------------------------------------------------------------------------

def dropout(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, x = outputs[0], inputs[0]
    if o.numel == 0:
        return
    ctype, sfx = _DROPOUT[x.dtype.name]
    getattr(lib, f"rumus_dropout_{sfx}")(_ptr(o, ctype), _ptr(x, ctype), o.numel, float(attrs["p"]),
                                         int(attrs["seed"]), int(attrs["offset"]))


_DROPOUT = {"float32": ("float *", "f32"), "float64": ("double *", "f64"), "float16": ("uint16_t *", "f16"),
            "bfloat16": ("uint16_t *", "bf16")}


def _kernels() -> list[tuple[str, Kernel, tuple[DType, ...]]]:
    # embedding, index_select and gather move bytes: float16/bfloat16 words go through as they are
    return [
        ("dropout", dropout, (*FLOAT, *HALF)),
        ("embedding", embedding, (*ALL, *HALF)),
        ("embedding_backward", embedding_backward, FLOAT),
        ("embedding_backward", widened_to_float32(embedding_backward), HALF),
        ("index_select", index_select, (*ALL, *HALF)),
        ("index_add", index_add, FLOAT),
        ("index_add", widened_to_float32(index_add), HALF),
        ("gather", gather, (*ALL, *HALF)),
        ("scatter_add", scatter_add, FLOAT),
        ("scatter_add", widened_to_float32(scatter_add), HALF),
    ]


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = _kernels()
