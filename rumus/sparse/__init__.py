"""Sparse COO tensors (torch.sparse_coo_tensor, Tensor.to_sparse, torch.sparse.mm / torch.spmm): the
indices-and-values form graph code builds adjacency matrices with. Products and to_dense are written with
core ops (gather / index_add), so gradients reach the values and the dense operand, as in torch; other
operations go through to_dense(). For large graphs and message passing, rumus_graph's SparseTensor has
fused kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import RumusError, ShapeError

from .. import _creation
from .. import _math as M
from .._indexing import index_add, index_select
from ..tensor import Tensor

__all__ = ["SparseCOOTensor", "addmm", "mm", "sparse_coo_tensor", "spmm", "sum"]


class SparseCOOTensor:
    """A COO sparse tensor: `indices` [sparse_dim, nnz] int64, `values` [nnz, *dense dims], `shape`."""

    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices: Tensor, values: Tensor, shape: tuple[int, ...], coalesced: bool = False) -> None:
        if indices.ndim != 2 or indices.shape[1] != values.shape[0]:
            raise ShapeError(f"sparse_coo_tensor: indices must be [sparse_dim, nnz] and values [nnz, ...]; got "
                             f"{tuple(indices.shape)} and {tuple(values.shape)}")
        self._idx, self._vals, self.shape = indices, values, tuple(int(s) for s in shape)
        self._coalesced = coalesced

    # ---- torch's accessors ------------------------------------------------------------------------------
    def _indices(self) -> Tensor:
        return self._idx

    def _values(self) -> Tensor:
        return self._vals

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._idx

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._vals

    def _nnz(self) -> int:
        return int(self._vals.shape[0])

    def sparse_dim(self) -> int:
        return int(self._idx.shape[0])

    def dense_dim(self) -> int:
        return len(self.shape) - self.sparse_dim()

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> Any:
        return self._vals.dtype

    @property
    def device(self) -> Any:
        return self._vals.device

    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    def requires_grad_(self, flag: bool = True) -> SparseCOOTensor:
        self._vals.requires_grad_(flag)
        return self

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _flat(self) -> Tensor:
        """Each entry's row-major position over the sparse dims (int64 [nnz])."""
        sdim = self.sparse_dim()
        strides = np.cumprod((self.shape[1:sdim] + (1,))[::-1])[::-1].astype(np.int64) if sdim else np.ones(0)
        weights = _creation.tensor(np.ascontiguousarray(strides).reshape(sdim, 1), dtype="int64",
                                   device=self._idx.device)
        return M.sum(M.mul(self._idx, weights), 0)

    def coalesce(self) -> SparseCOOTensor:
        """Duplicate indices summed, entries sorted by index (torch's rule)."""
        if self._coalesced:
            return self
        flat = self._flat().numpy()
        uniq, inverse = np.unique(flat, return_inverse=True)
        sdim = self.sparse_dim()
        new_idx = np.stack(np.unravel_index(uniq, self.shape[:sdim])) if sdim else np.zeros((0, len(uniq)))
        zeros = _creation.zeros(len(uniq), *self._vals.shape[1:], dtype=self._vals.dtype, device=self._vals.device)
        pos = _creation.tensor(inverse.astype(np.int64), device=self._vals.device)
        vals = index_add(zeros, 0, pos, self._vals)
        idx = _creation.tensor(new_idx.astype(np.int64).reshape(sdim, len(uniq)), device=self._idx.device)
        return SparseCOOTensor(idx, vals, self.shape, coalesced=True)

    def to_dense(self) -> Tensor:
        sdim = self.sparse_dim()
        n = int(np.prod(self.shape[:sdim])) if sdim else 1
        out = _creation.zeros(n, *self.shape[sdim:], dtype=self._vals.dtype, device=self._vals.device)
        return index_add(out, 0, self._flat(), self._vals).reshape(*self.shape)

    def t(self) -> SparseCOOTensor:
        if self.ndim != 2 or self.sparse_dim() != 2:
            raise ShapeError("t() on a sparse tensor needs a 2-D matrix with 2 sparse dims")
        return SparseCOOTensor(self._idx.flip(0), self._vals, (self.shape[1], self.shape[0]))

    def to(self, *args: Any, **kwargs: Any) -> SparseCOOTensor:
        return SparseCOOTensor(self._idx.to(*args, **{k: v for k, v in kwargs.items() if k != "dtype"})
                               if not _is_dtype_only(args, kwargs) else self._idx,
                               self._vals.to(*args, **kwargs), self.shape, self._coalesced)

    def cpu(self) -> SparseCOOTensor:
        return self.to("cpu")

    def double(self) -> SparseCOOTensor:
        return SparseCOOTensor(self._idx, self._vals.double(), self.shape, self._coalesced)

    def float(self) -> SparseCOOTensor:
        return SparseCOOTensor(self._idx, self._vals.float(), self.shape, self._coalesced)

    def __matmul__(self, other: Tensor) -> Tensor:
        return mm(self, other)

    def mm(self, other: Tensor) -> Tensor:
        return mm(self, other)

    def matmul(self, other: Tensor) -> Tensor:
        return mm(self, other)

    def mul(self, other: Any) -> SparseCOOTensor:
        if isinstance(other, (int, float)):
            return SparseCOOTensor(self._idx, M.mul(self._vals, other), self.shape, self._coalesced)
        raise RumusError("sparse * tensor: only a number is supported; use .to_dense() for other products")

    __mul__ = __rmul__ = mul

    def __repr__(self) -> str:
        return (f"tensor(indices={self._idx!r},\n       values={self._vals!r},\n       size={self.shape}, "
                f"nnz={self._nnz()}, layout=torch.sparse_coo)")


def _is_dtype_only(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    from rumus_contracts import DType
    return bool(args) and isinstance(args[0], DType) or (not args and "dtype" in kwargs and "device" not in kwargs)


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None, device: Any = None,
                      requires_grad: bool = False, check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> SparseCOOTensor:
    idx = indices if isinstance(indices, Tensor) else _creation.tensor(np.asarray(indices), dtype="int64",
                                                                        device=device)
    idx = idx.to("int64") if idx.dtype.name != "int64" else idx
    vals = values if isinstance(values, Tensor) else _creation.tensor(values, dtype=dtype, device=device)
    if dtype is not None and vals.dtype != dtype:
        vals = vals.to(dtype)
    host = idx.numpy()
    if size is None:
        size = tuple(int(m) + 1 for m in host.max(1)) + tuple(vals.shape[1:]) if host.size else \
            (0,) * host.shape[0] + tuple(vals.shape[1:])
    shape = tuple(int(s) for s in size)
    if host.size and (host.min() < 0 or np.any(host.max(1) >= np.asarray(shape[:host.shape[0]]))):
        raise ShapeError(f"sparse_coo_tensor: an index is outside the size {shape}")
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseCOOTensor(idx, vals, shape, coalesced=bool(is_coalesced))


def mm(sparse: SparseCOOTensor, dense: Tensor) -> Tensor:
    """sparse [n, m] @ dense [m, k] -> dense [n, k]; gradients reach the sparse values and `dense`."""
    if not isinstance(sparse, SparseCOOTensor):
        return M.mm(sparse, dense)
    if sparse.ndim != 2 or sparse.sparse_dim() != 2 or dense.ndim not in (1, 2):
        raise ShapeError(f"sparse.mm: needs a 2-D sparse matrix and a 1-D or 2-D dense one, got {sparse.shape} and "
                         f"{tuple(dense.shape)}")
    if dense.shape[0] != sparse.shape[1]:
        raise ShapeError(f"sparse.mm: shapes {sparse.shape} and {tuple(dense.shape)} cannot be multiplied")
    vector = dense.ndim == 1
    d = dense.unsqueeze(1) if vector else dense
    rows, cols = sparse._idx[0], sparse._idx[1]
    picked = index_select(d, 0, cols)  # [nnz, k]
    contrib = M.mul(picked, sparse._vals.unsqueeze(1).to(picked.dtype))
    out = _creation.zeros(sparse.shape[0], d.shape[1], dtype=contrib.dtype, device=contrib.device)
    out = index_add(out, 0, rows, contrib)
    return out.squeeze(1) if vector else out


def spmm(sparse: SparseCOOTensor, dense: Tensor) -> Tensor:
    return mm(sparse, dense)


def addmm(mat: Tensor, sparse: SparseCOOTensor, dense: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    return M.add(M.mul(mat, beta), M.mul(mm(sparse, dense), alpha))


def sum(input: SparseCOOTensor, dim: Any = None) -> Tensor:  # noqa: A001  (torch.sparse.sum's name)
    dense = input.to_dense()
    return M.sum(dense) if dim is None else M.sum(dense, dim)


def to_sparse(self: Tensor, sparse_dim: int | None = None) -> SparseCOOTensor:
    """Tensor.to_sparse(): the non-zero entries of a dense tensor (all dims sparse, torch's default)."""
    host = self.detach().numpy()
    nz = np.nonzero(host)
    idx = _creation.tensor(np.stack(nz).astype(np.int64).reshape(self.ndim, -1), device=self.device)
    flat = _creation.tensor(np.ravel_multi_index(nz, host.shape).astype(np.int64), device=self.device) \
        if self.ndim else _creation.zeros(0, dtype="int64")
    vals = index_select(self.reshape(-1), 0, flat)
    return SparseCOOTensor(idx, vals, tuple(self.shape), coalesced=True)


def _legacy_sparse(dtype_name: str) -> Any:
    def make(indices: Tensor, values: Tensor, size: Any = None) -> SparseCOOTensor:
        return sparse_coo_tensor(indices, values, size, dtype=dtype_name)
    return make


FloatTensor = _legacy_sparse("float32")
DoubleTensor = _legacy_sparse("float64")
LongTensor = _legacy_sparse("int64")
