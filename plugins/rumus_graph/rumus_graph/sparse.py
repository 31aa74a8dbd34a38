"""SparseTensor: a sparse matrix (CSR, with its transpose's CSR precomputed) over rumus tensors.

The structure (which entries exist) lives twice: as numpy arrays on the host, where it is built,
validated and sampled, and as int32 rumus tensors on the device, where the kernels read it. The
values are an ordinary rumus tensor (nnz,) in row order, so gradients flow to them like to any tensor.

Graph convention (PyG's, flow source -> target): `from_edge_index(edge_index)` puts the edge j -> i
at row i (target), column j (source), so `A @ x` sums each node's incoming messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rumus as rm
from rumus_contracts import Device, DTypeError, IndexOutOfRange, RumusError, ShapeError

from .structure import Bundle, bundle, check_indices, check_size, row_order, rows_of


def take_rows(x: rm.Tensor, index: rm.Tensor) -> rm.Tensor:
    """x's rows picked by an int32 index tensor (differentiable in x); indices were validated on the host."""
    out: rm.Tensor = rm.ops.index_select(x, index, dim=0)
    return out


def host_indices(what: str, idx: Any) -> np.ndarray:
    """An index argument (numpy array, list or integer rumus tensor) as a 1-D int64 numpy array."""
    if isinstance(idx, rm.Tensor):
        if idx.dtype.is_floating or idx.dtype.is_bool:
            raise DTypeError(f"{what} must be an integer tensor, got {idx.dtype}")
        idx = idx.numpy()
    arr = np.asarray(idx)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if arr.size == 0:
            return np.zeros(0, np.int64)
        raise DTypeError(f"{what} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


class SparseTensor:
    """An (n_rows, n_cols) sparse matrix with `nnz` stored entries (duplicates allowed: they add up).

    Build it with `from_coo`, `from_csr` or `from_edge_index`; every index is checked on the host and an
    out-of-range one raises IndexOutOfRange. `A @ x` is differentiable in `A.values` and `x`.
    """

    def __init__(self, host: Bundle, shape: tuple[int, int], values: rm.Tensor, device: Any = None) -> None:
        self.host = host
        self.shape = (int(shape[0]), int(shape[1]))
        nnz = host.col.size
        if tuple(values.shape) != (nnz,):
            raise ShapeError(f"SparseTensor: values must have shape ({nnz},), one per stored entry, got "
                             f"{tuple(values.shape)}")
        if not values.dtype.is_floating:
            raise DTypeError(f"SparseTensor: values must be floating point, got {values.dtype}")
        self.values = values
        self.device = values.device
        if device is not None and Device.parse(device) != self.device:
            raise RumusError(f"SparseTensor: values live on {values.device}, not {device}; move them first")
        self.index = tuple(rm.tensor(a, dtype=rm.int32, device=self.device) for a in host)

    # ---- construction -------------------------------------------------------------------------------

    @classmethod
    def from_coo(cls, row: Any, col: Any, values: Any = None, shape: tuple[int, int] | None = None,
                 dtype: Any = None, device: Any = None) -> SparseTensor:
        """Entries (row[k], col[k]) with values[k] (default 1), in any order; shape defaults to max index + 1."""
        r, c = host_indices("row", row), host_indices("col", col)
        if r.size != c.size:
            raise ShapeError(f"SparseTensor.from_coo: row and col must have the same length, got {r.size} and {c.size}")
        if shape is None:
            shape = (int(r.max()) + 1 if r.size else 0, int(c.max()) + 1 if c.size else 0)
        n, m = check_size("n_rows", shape[0]), check_size("n_cols", shape[1])
        check_indices("row", r, n)
        check_indices("col", c, m)
        order = row_order(r)
        host = bundle(r[order], c[order], n, m)
        return cls(host, (n, m), _values(values, order, r.size, dtype, device), device)

    @classmethod
    def from_edge_index(cls, edge_index: Any, num_nodes: int | None = None, values: Any = None,
                        dtype: Any = None, device: Any = None) -> SparseTensor:
        """PyG's edge_index (2, E): row 0 the sources, row 1 the targets; the matrix has the edge j -> i at
        (i, j), so A @ x aggregates messages at their targets."""
        ei = edge_index.numpy() if isinstance(edge_index, rm.Tensor) else np.asarray(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ShapeError(f"edge_index must have shape (2, num_edges), got {ei.shape}")
        if num_nodes is None:
            num_nodes = int(ei.max()) + 1 if ei.size else 0
        return cls.from_coo(ei[1], ei[0], values, (num_nodes, num_nodes), dtype, device)

    @classmethod
    def from_csr(cls, rowptr: Any, col: Any, values: Any = None, shape: tuple[int, int] | None = None,
                 dtype: Any = None, device: Any = None) -> SparseTensor:
        ptr = host_indices("rowptr", rowptr)
        if ptr.size < 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
            raise IndexOutOfRange("SparseTensor.from_csr: rowptr must start at 0 and never decrease")
        c = host_indices("col", col)
        if ptr[-1] != c.size:
            raise IndexOutOfRange(f"SparseTensor.from_csr: rowptr ends at {int(ptr[-1])} but col has {c.size} entries")
        n = ptr.size - 1
        shape = shape or (n, int(c.max()) + 1 if c.size else 0)
        if shape[0] != n:
            raise ShapeError(f"SparseTensor.from_csr: rowptr describes {n} rows, shape says {shape[0]}")
        return cls.from_coo(rows_of(ptr), c, values, shape, dtype, device)

    def with_values(self, values: rm.Tensor) -> SparseTensor:
        """The same structure with other values (nnz,), in this matrix's row order (e.g. attention weights)."""
        out = SparseTensor.__new__(SparseTensor)
        out.host, out.shape, out.device, out.index = self.host, self.shape, self.device, self.index
        if tuple(values.shape) != (self.nnz,):
            raise ShapeError(f"with_values: expected shape ({self.nnz},), got {tuple(values.shape)}")
        out.values = values
        return out

    # ---- properties ---------------------------------------------------------------------------------

    @property
    def nnz(self) -> int:
        return int(self.host.col.size)

    @property
    def rowptr(self) -> rm.Tensor:
        return self.index[0]

    @property
    def col(self) -> rm.Tensor:
        return self.index[1]

    def row_host(self) -> np.ndarray:
        """The row of each stored entry (host int64), in storage order."""
        return rows_of(self.host.rowptr)

    def coo(self) -> tuple[np.ndarray, np.ndarray]:
        """(row, col) of each stored entry on the host, in storage order."""
        return self.row_host(), self.host.col.astype(np.int64)

    def __repr__(self) -> str:
        return f"SparseTensor(shape={self.shape}, nnz={self.nnz}, dtype={self.values.dtype}, device={self.device})"

    # ---- operations ---------------------------------------------------------------------------------

    def matmul(self, x: rm.Tensor) -> rm.Tensor:
        from .functional import spmm
        return spmm(self, x)

    __matmul__ = matmul

    def t(self) -> SparseTensor:
        """The transpose: the column-grouped arrays become the rows (no sort; values re-ordered, differentiably)."""
        h = self.host
        host = Bundle(h.csc_ptr, h.csc_row, h.rowptr, h.col, np.argsort(h.csc_eid, kind="stable").astype(np.int32))
        out = SparseTensor.__new__(SparseTensor)
        out.host, out.shape, out.device = host, (self.shape[1], self.shape[0]), self.device
        out.index = (self.index[2], self.index[3], self.index[0], self.index[1],
                     rm.tensor(host.csc_eid, dtype=rm.int32, device=self.device))
        out.values = take_rows(self.values, self.index[4]) if self.nnz else self.values
        return out

    transpose = t

    def to_dense(self) -> rm.Tensor:
        """The (n_rows, n_cols) dense matrix (duplicates summed), differentiable in the values."""
        eye = rm.eye(self.shape[1], dtype=self.values.dtype, device=self.device)
        return self @ eye

    def to(self, device: Any) -> SparseTensor:
        return SparseTensor(self.host, self.shape, self.values.to(device), device)

    def sum(self, dim: int) -> rm.Tensor:
        """Row sums (dim=1: one per row) or column sums (dim=0: one per column) of the values."""
        from .functional import segment_sum
        if dim in (1, -1):
            return segment_sum(self.values, self.index[0])
        if dim in (0, -2):
            return segment_sum(take_rows(self.values, self.index[4]), self.index[2])
        raise IndexOutOfRange(f"SparseTensor.sum: dim must be 0 or 1, got {dim}")

    def degree(self, dim: int = 1) -> np.ndarray:
        """Stored entries per row (dim=1, a node's in-degree in graph convention) or per column (dim=0)."""
        ptr = self.host.rowptr if dim in (1, -1) else self.host.csc_ptr
        return np.diff(ptr.astype(np.int64))


def _values(values: Any, order: np.ndarray, nnz: int, dtype: Any, device: Any) -> rm.Tensor:
    """The values in row order: a rumus tensor is permuted with index_select (keeps its gradient)."""
    if values is None:
        return rm.ones(nnz, dtype=dtype or rm.float32, device=device)
    if isinstance(values, rm.Tensor):
        if tuple(values.shape) != (nnz,):
            raise ShapeError(f"SparseTensor: values must have shape ({nnz},), got {tuple(values.shape)}")
        if dtype is not None and values.dtype != dtype:
            raise DTypeError(f"SparseTensor: values are {values.dtype} but dtype={dtype} was asked for")
        if device is not None and values.device != Device.parse(device):
            raise RumusError(f"SparseTensor: values live on {values.device}, not {device}; move them first")
        perm = rm.tensor(order.astype(np.int32), dtype=rm.int32, device=values.device)
        return take_rows(values, perm) if nnz else values
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (nnz,):
        raise ShapeError(f"SparseTensor: values must have shape ({nnz},), got {arr.shape}")
    return rm.tensor(arr[order], dtype=dtype or rm.float32, device=device)
