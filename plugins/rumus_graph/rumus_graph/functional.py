"""The user-facing sparse functions: they check arguments on the host, then call the plugin's ops.

Index arguments (pointers, scatter indices) may be numpy arrays or integer rumus tensors; they are
validated on the host (on a GPU backend that is one read-back of the index), so an out-of-range
index raises IndexOutOfRange here and never reaches a kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rumus as rm
from rumus_contracts import DeviceMismatch, DTypeError, IndexOutOfRange, ShapeError

from .sparse import SparseTensor, host_indices, take_rows
from .structure import check_indices, pointers, row_order


def _same_place(what: str, a: SparseTensor, x: rm.Tensor) -> None:
    if x.device != a.device:
        raise DeviceMismatch(f"{what}: the sparse matrix is on {a.device} but the dense operand on {x.device}; "
                             f"move one with .to(...)")
    if x.dtype != a.values.dtype:
        raise DTypeError(f"{what}: the sparse values are {a.values.dtype} but the dense operand is {x.dtype}")


def spmm(a: SparseTensor, x: rm.Tensor) -> rm.Tensor:
    """a @ x for x of shape (n_cols,) or (n_cols, F); differentiable in a.values and x."""
    _same_place("spmm", a, x)
    if x.dim() not in (1, 2) or x.shape[0] != a.shape[1]:
        raise ShapeError(f"spmm: a sparse {a.shape} matrix needs x of shape ({a.shape[1]},) or ({a.shape[1]}, F), "
                         f"got {tuple(x.shape)}")
    out = rm.ops.graph_spmm(*a.index, a.values, x.reshape(a.shape[1], -1) if x.dim() == 1 else x)
    return out.reshape(a.shape[0]) if x.dim() == 1 else out


def sddmm(a: SparseTensor, p: rm.Tensor, q: rm.Tensor) -> rm.Tensor:
    """dot(p[row], q[col]) for every stored entry of a, in its storage (row) order: shape (nnz,)."""
    _same_place("sddmm", a, p)
    _same_place("sddmm", a, q)
    return rm.ops.graph_sddmm(*a.index, p, q)


def _ptr_tensor(ptr: Any, rows: int, device: Any) -> rm.Tensor:
    host = host_indices("ptr", ptr)
    if host.ndim != 1 or host.size < 1 or host[0] != 0 or host[-1] != rows or np.any(np.diff(host) < 0):
        raise IndexOutOfRange(f"ptr must be 1-D, start at 0, never decrease and end at the {rows} rows of src; "
                              f"got {host[:8].tolist()}{'...' if host.size > 8 else ''}")
    if isinstance(ptr, rm.Tensor) and ptr.dtype == rm.int32 and ptr.device == device:
        return ptr
    return rm.tensor(host.astype(np.int32), dtype=rm.int32, device=device)


def _segment(op: str, src: rm.Tensor, ptr: Any) -> rm.Tensor:
    if src.dim() < 1:
        raise ShapeError(f"{op}: src must have at least one dim, got a 0-D tensor")
    out: rm.Tensor = getattr(rm.ops, f"graph_{op}")(src, _ptr_tensor(ptr, src.shape[0], src.device))
    return out


def segment_sum(src: rm.Tensor, ptr: Any) -> rm.Tensor:
    """out[i] = sum of src[ptr[i]:ptr[i+1]] (0 for an empty segment)."""
    return _segment("segment_sum", src, ptr)


def segment_mean(src: rm.Tensor, ptr: Any) -> rm.Tensor:
    return _segment("segment_mean", src, ptr)


def segment_max(src: rm.Tensor, ptr: Any) -> rm.Tensor:
    """Per-segment max (0 for an empty segment); the gradient goes to the first row holding the max."""
    return _segment("segment_max", src, ptr)


def segment_argmax(src: rm.Tensor, ptr: Any) -> rm.Tensor:
    """The absolute row of each segment's max (int32; -1 for an empty segment)."""
    return _segment("segment_argmax", src, ptr)


def _scatter(op: str, src: rm.Tensor, index: Any, dim_size: int | None) -> rm.Tensor:
    """Sort the index once on the host, gather src into that order, and reduce consecutive segments."""
    if src.dim() < 1:
        raise ShapeError(f"scatter_{op}: src must have at least one dim, got a 0-D tensor")
    idx = host_indices("index", index).reshape(-1)
    if idx.size != src.shape[0]:
        raise ShapeError(f"scatter_{op}: index has {idx.size} entries but src has {src.shape[0]} rows (dim 0)")
    n = int(idx.max()) + 1 if dim_size is None and idx.size else int(dim_size or 0)
    check_indices("index", idx, n)
    order = row_order(idx)
    ptr = rm.tensor(pointers(idx[order], n), dtype=rm.int32, device=src.device)
    if idx.size and np.any(order != np.arange(idx.size)):
        src = take_rows(src, rm.tensor(order.astype(np.int32), dtype=rm.int32, device=src.device))
    out: rm.Tensor = getattr(rm.ops, f"graph_segment_{op}")(src, ptr)
    return out


def scatter_sum(src: rm.Tensor, index: Any, dim_size: int | None = None) -> rm.Tensor:
    """out[index[k]] += src[k] along dim 0 (torch_scatter's scatter_sum); deterministic, atomic-free."""
    return _scatter("sum", src, index, dim_size)


def scatter_mean(src: rm.Tensor, index: Any, dim_size: int | None = None) -> rm.Tensor:
    return _scatter("mean", src, index, dim_size)


def scatter_max(src: rm.Tensor, index: Any, dim_size: int | None = None) -> rm.Tensor:
    """Per-target max along dim 0 (0 where no row arrives); the gradient follows the first maximal row."""
    return _scatter("max", src, index, dim_size)


def edge_softmax(a: SparseTensor, logits: rm.Tensor) -> rm.Tensor:
    """Softmax of per-entry logits (nnz,) or (nnz, heads) over each row's entries: in graph convention,
    over the edges arriving at each node (GAT's attention)."""
    if logits.dim() < 1 or logits.shape[0] != a.nnz:
        raise ShapeError(f"edge_softmax: logits need one row per stored entry ({a.nnz}), got {tuple(logits.shape)}")
    if logits.device != a.device:
        raise DeviceMismatch(f"edge_softmax: logits on {logits.device}, the graph on {a.device}")
    return rm.ops.graph_edge_softmax(logits, a.rowptr)


def expand_rows(a: SparseTensor, x: rm.Tensor) -> rm.Tensor:
    """x[row] for every stored entry: each row's value repeated over its entries (nnz, ...)."""
    if x.dim() < 1 or x.shape[0] != a.shape[0]:
        raise ShapeError(f"expand_rows: x needs one row per matrix row ({a.shape[0]}), got {tuple(x.shape)}")
    return rm.ops.graph_segment_expand(x, a.rowptr, num_rows=a.nnz)


def gather_cols(a: SparseTensor, x: rm.Tensor) -> rm.Tensor:
    """x[col] for every stored entry (nnz, ...)."""
    if x.dim() < 1 or x.shape[0] != a.shape[1]:
        raise ShapeError(f"gather_cols: x needs one row per matrix column ({a.shape[1]}), got {tuple(x.shape)}")
    return take_rows(x, a.col)
