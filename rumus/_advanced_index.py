"""Advanced indexing, read and write, with autograd: x[idx], x[[0, 2]], x[range(n), y], x[mask],
x[idx] = v, x[mask] = v, mixed with ints, slices, None and Ellipsis (PyTorch's rules).

The index is resolved on the host into the flat row-major position of every selected element (one
host read of the index tensors: on GPU backends an index or mask tensor is read back — the result's
size depends on a mask's contents, as in PyTorch). Then:
  read:  index_select(x.reshape(-1), 0, positions).reshape(result shape)
  write: index_add(where(written, 0, x_flat), 0, positions, values), committed into x in place
so existing ops (and their backward formulas) carry the gradient. For repeated positions in a write
the last value wins (numpy's and PyTorch-CPU's order); the overwritten values get zero gradient.

Rule (PyTorch's, which differs from numpy's): integers are applied first as plain selections; the
advanced indices then follow numpy's rules on what remains — broadcast together, their dims placed
where the first one stood when they are adjacent, in front otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import DTypeError, RumusError, ShapeError, bool_, contiguous_strides, int64

from ._tensor_base import Tensor, make_tensor

_BASIC_TYPES = (int, slice, type(None), type(Ellipsis))


def is_advanced(index: Any) -> bool:
    """Whether `index` needs advanced indexing (a tensor, list, range or array anywhere in it)."""
    t = type(index)
    if t in _BASIC_TYPES:  # x[i], x[a:b]: the hot path, decided by one type test
        return False
    if t is tuple:
        for i in index:
            if type(i) not in _BASIC_TYPES and _advanced_item(i):
                return True
        return False
    return _advanced_item(index)


def _advanced_item(item: Any) -> bool:
    t = type(item)
    if t in _BASIC_TYPES:
        return False
    if t is bool:
        raise RumusError("indexing with a Python bool (x[True]) is not supported; use x[None] or a bool tensor mask")
    return isinstance(item, (Tensor, list, range, np.ndarray))


def _to_host_index(item: Any) -> np.ndarray:
    if isinstance(item, Tensor):
        if item.dtype.kind not in "iub":
            raise DTypeError(f"tensors used as indices must be integer or bool, got {item.dtype}; use .long()")
        arr = item.numpy()  # the host read (a device read-back on GPU backends)
        return arr.astype(bool) if item.dtype == bool_ or item.dtype.name == "uint8" else arr.astype(np.int64)
    if isinstance(item, range):
        return np.arange(item.start, item.stop, item.step, dtype=np.int64)
    try:
        arr = np.asarray(item)
    except (ValueError, TypeError) as e:
        raise RumusError(f"cannot use {type(item).__name__} {item!r} as an index: {e}") from None
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # x[[]]: an empty integer index
    if arr.dtype.kind == "b":
        return arr
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"indices must be integers or bools, got an index of dtype {arr.dtype}")
    return arr.astype(np.int64)


def positions(x: Tensor, index: Any) -> np.ndarray:
    """For x[index]: an int64 array of the result's shape holding each element's flat row-major
    position in x."""
    items = index if type(index) is tuple else (index,)
    host: list[Any] = [_to_host_index(i) if _advanced_item(i) else i for i in items]
    consumed = sum(i.ndim if isinstance(i, np.ndarray) and i.dtype == bool else
                   0 if i is None or i is Ellipsis else 1 for i in host)
    n_ell = sum(1 for i in host if i is Ellipsis)
    if n_ell > 1:
        raise RumusError("an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise ShapeError(f"too many indices for a tensor of shape {x.shape}: {consumed} dims indexed")
    if n_ell:
        p = host.index(Ellipsis)
        host[p:p + 1] = [slice(None)] * (x.ndim - consumed)
    # 1. ints, slices and None as a plain (logical, contiguous-layout) view; advanced items keep their dims
    basic: list[Any] = []
    advanced: list[Any] = []
    for i in host:
        if isinstance(i, np.ndarray):
            k = i.ndim if i.dtype == bool else 1
            basic.extend([slice(None)] * k)
            advanced.append(i)
        elif i is None:
            basic.append(None)
            advanced.append(slice(None))
        elif isinstance(i, slice):
            basic.append(i)
            advanced.append(slice(None))
        else:
            basic.append(i)  # an int: selected here, no dim left for the advanced step
    from ._views import _index_layout  # late binding: basic indexing (a layer up) lays out the sliced dims
    logical = make_tensor(x._storage, x.shape, contiguous_strides(x.shape), 0)
    try:
        shape, strides, offset = _index_layout(logical, tuple(basic))
    except ShapeError:
        raise
    # 2. the advanced step, by numpy on zero-copy coordinate grids of that view
    pos = np.full((), offset, dtype=np.int64)
    np_index = tuple(advanced)
    try:
        for d, (size, stride) in enumerate(zip(shape, strides)):
            grid = np.lib.stride_tricks.as_strided(
                np.arange(size, dtype=np.int64), shape=shape,
                strides=tuple(8 if k == d else 0 for k in range(len(shape))))
            pos = pos + grid[np_index] * stride
    except IndexError as e:
        raise ShapeError(f"index out of range for a tensor of shape {x.shape}: {e}") from None
    return np.array(pos, dtype=np.int64)  # (np.ascontiguousarray would turn a 0-d result into 1-d)


def _positions_on(device_like: Tensor, pos: np.ndarray) -> Tensor:
    from ._creation import from_host
    return from_host(pos.reshape(-1), int64, device_like.device)


def _one_dim_index(x: Tensor, index: Any) -> tuple[int, np.ndarray] | None:
    """x[idx] / x[:, idx] with one 1-D integer index and full slices around it: (dim, wrapped index)."""
    items = index if type(index) is tuple else (index,)
    if len(items) > x.ndim:
        return None
    dim, arr = -1, None
    for d, item in enumerate(items):
        if type(item) is slice and item == slice(None):
            continue
        if dim >= 0 or not _advanced_item(item):
            return None
        arr = _to_host_index(item)
        if arr.dtype == bool or arr.ndim != 1:
            return None
        dim = d
    if arr is None:
        return None
    size = x.shape[dim]
    if arr.size and (arr.min() < -size or arr.max() >= size):
        raise ShapeError(f"index out of range: indices {arr.min()}..{arr.max()} for dim {dim} of size {size} "
                         f"(shape {x.shape})")
    return dim, np.where(arr < 0, arr + size, arr)


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index] with an advanced index: a new tensor (not a view), differentiable."""
    from . import _indexing  # late binding: index_select, an op function a layer up
    simple = _one_dim_index(x, index)
    if simple is not None:  # the common x[idx]: one index_select along that dim, no per-element positions
        dim, idx = simple
        return _indexing.index_select(x, dim, _positions_on(x, idx))
    pos = positions(x, index)
    flat = x.reshape(-1)
    return _indexing.index_select(flat, 0, _positions_on(x, pos)).reshape(pos.shape)


def setitem(x: Tensor, index: Any, value: Any) -> None:
    """x[index] = value with an advanced index, in place; recorded by autograd when x or value
    requires grad (the write rebases x's history, or its base's when x is a view)."""
    from . import _indexing, _inplace, _math, _views  # late binding: the write uses the op functions above
    from ._creation import check_size, from_host, tensor
    pos = positions(x, index)
    if not isinstance(value, Tensor):
        value = tensor(value, dtype=x.dtype, device=x.device)
    if value.device != x.device:
        value = _math.to_device(value, x.device)
    if value.dtype != x.dtype:
        value = _math.cast(value, x.dtype)
    try:
        value = _views.expand(value, pos.shape) if value.shape != pos.shape else value
    except ShapeError:
        raise ShapeError(f"shape mismatch: value of shape {value.shape} cannot be broadcast to the indexing "
                         f"result of shape {pos.shape}") from None
    flat_pos = pos.reshape(-1)
    values = value.reshape(-1)
    # repeated positions: the last write wins, so only the last occurrence of each position is kept
    rev_unique, rev_first = np.unique(flat_pos[::-1], return_index=True)
    if rev_unique.size != flat_pos.size:
        keep = np.sort(flat_pos.size - 1 - rev_first)
        values = _indexing.index_select(values, 0, _positions_on(x, keep))
        flat_pos = flat_pos[keep]
    check_size("index_put", x.shape, x.element_size())  # the result (the host mask is smaller)
    written = np.zeros(x.numel(), dtype=bool)
    written[flat_pos] = True
    mask = from_host(written, bool_, x.device)
    x_flat = x.reshape(-1)
    kept = _math.where(mask, 0, x_flat)
    result = _indexing.index_add(kept, 0, _positions_on(x, flat_pos), values)
    _inplace.commit(x, result.reshape(x.shape), "item assignment")
