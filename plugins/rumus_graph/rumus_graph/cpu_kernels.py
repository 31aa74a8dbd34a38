"""CPU kernels: the CPU backend's buffers are flat numpy arrays (its documented contract), so each
kernel hands pointers into them to the C code in csrc/graph_kernels.c. Every op lists all of its
inputs as `contiguous`, so only offsets matter here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import IndexOutOfRange, TensorArg

from ._graph_kernels import ffi, lib

Kernel = Callable[[Sequence[TensorArg], Sequence[TensorArg], Mapping[str, Any]], None]

_CTYPE = {"float32": ("float", "f32"), "float64": ("double", "f64"), "int32": ("int32_t", "i32")}
_ERRORS = {1: "its pointer array is not monotone from 0 to the entry count",
           2: "an index lies outside the dimension it indexes",
           3: "an entry id lies outside [0, nnz)"}


def _ptr(arg: TensorArg, ctype: str | None = None) -> Any:
    ctype = ctype or _CTYPE[arg.dtype.name][0]
    return ffi.cast(f"{ctype} *", arg.buffer.ctypes.data) + arg.offset


def _bytes(arg: TensorArg) -> Any:
    return ffi.cast("char *", arg.buffer.ctypes.data) + arg.offset * arg.buffer.itemsize


def _idx(arg: TensorArg) -> Any:
    return _ptr(arg, "int32_t")


def _check(op: str, rc: int) -> None:
    if rc:
        raise IndexOutOfRange(f"{op}: bad sparse structure: {_ERRORS.get(rc, f'code {rc}')}; build it with "
                              f"rumus_graph.SparseTensor, which validates indices")


def _cols(arg: TensorArg) -> int:
    n = 1
    for s in arg.shape[1:]:
        n *= s
    return n


def spmm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """graph_spmm: out = A @ x over the CSR arrays."""
    (out,), (rowptr, col, _cp, _cr, _ce, val, x) = outputs, inputs
    sfx = _CTYPE[val.dtype.name][1]
    _check("graph_spmm", getattr(lib, f"rg_spmm_{sfx}")(
        _idx(rowptr), _idx(col), ffi.NULL, _ptr(val), _ptr(x), _ptr(out),
        out.shape[0], x.shape[0], val.shape[0], _cols(x)))


def spmm_t(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """graph_spmm_t: out = A.T @ x over the column-grouped arrays (entry ids pick the values)."""
    (out,), (_rp, _c, csc_ptr, csc_row, csc_eid, val, x) = outputs, inputs
    sfx = _CTYPE[val.dtype.name][1]
    _check("graph_spmm_t", getattr(lib, f"rg_spmm_{sfx}")(
        _idx(csc_ptr), _idx(csc_row), _idx(csc_eid), _ptr(val), _ptr(x), _ptr(out),
        out.shape[0], x.shape[0], val.shape[0], _cols(x)))


def sddmm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out,), (rowptr, col, _cp, _cr, _ce, a, b) = outputs, inputs
    sfx = _CTYPE[a.dtype.name][1]
    _check("graph_sddmm", getattr(lib, f"rg_sddmm_{sfx}")(
        _idx(rowptr), _idx(col), _ptr(a), _ptr(b), _ptr(out), a.shape[0], b.shape[0], out.shape[0], _cols(a)))


def _segment(op: str, mode: int) -> Kernel:
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        (out,), (src, ptr) = outputs, inputs
        sfx = _CTYPE[src.dtype.name][1]
        _check(op, getattr(lib, f"rg_segment_reduce_{sfx}")(
            _ptr(src), _idx(ptr), _ptr(out), ffi.NULL, out.shape[0], src.shape[0], _cols(src), mode))
    kernel.__name__ = op
    return kernel


segment_sum = _segment("graph_segment_sum", 0)
segment_mean = _segment("graph_segment_mean", 1)
segment_max = _segment("graph_segment_max", 2)


def segment_argmax(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (arg,), (src, ptr) = outputs, inputs
    sfx = _CTYPE[src.dtype.name][1]
    scratch = ffi.new(f"{_CTYPE[src.dtype.name][0]}[]", max(arg.numel, 1))  # the max values, not needed
    _check("graph_segment_argmax", getattr(lib, f"rg_segment_reduce_{sfx}")(
        _ptr(src), _idx(ptr), scratch, _idx(arg), arg.shape[0], src.shape[0], _cols(src), 2))


def segment_expand(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out,), (src, ptr) = outputs, inputs
    item = src.buffer.itemsize
    _check("graph_segment_expand", lib.rg_segment_expand(
        _bytes(src), _idx(ptr), _bytes(out), src.shape[0], out.shape[0], _cols(src) * item))


def edge_softmax(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out,), (x, ptr) = outputs, inputs
    sfx = _CTYPE[x.dtype.name][1]
    _check("graph_edge_softmax", getattr(lib, f"rg_edge_softmax_{sfx}")(
        _ptr(x), _idx(ptr), _ptr(out), ptr.shape[0] - 1, x.shape[0], _cols(x)))


KERNELS: dict[str, Kernel] = {
    "graph_spmm": spmm, "graph_spmm_t": spmm_t, "graph_sddmm": sddmm, "graph_segment_sum": segment_sum,
    "graph_segment_mean": segment_mean, "graph_segment_max": segment_max, "graph_segment_argmax": segment_argmax,
    "graph_segment_expand": segment_expand, "graph_edge_softmax": edge_softmax,
}
