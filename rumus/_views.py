"""Metadata-only views (reshape, permute, slicing, expand, squeeze, ...): they share storage and keep
autograd. No view has an "untracked" variant."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rumus_contracts import IndexOutOfRange, RumusError, ShapeError, contiguous_strides
from rumus_contracts.shapes import normalize_dim

from . import _advanced_index
from .autograd.grad_mode import state as grad_state
from .autograd.graph import Context, Node
from ._tensor_base import Tensor, make_tensor

Backward = Callable[..., Sequence[Tensor | None]]
# ONNX export (rumus.onnx) sets this to observe every view: fn(name, base, out, attrs).
_tracer: Callable[..., None] | None = None


def _view(base: Tensor, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, name: str,
          backward: Backward, attrs: dict[str, Any]) -> Tensor:
    out = make_tensor(base._storage, shape, strides, offset)
    out._base = base._base if base._base is not None else base
    if _tracer is not None:
        _tracer(name, base, out, attrs)
    if grad_state.enabled:
        # a differentiable view: after an in-place change of its base it takes its history from there
        out._view_version = base._storage.version
        if base._requires_grad or (base._view_version >= 0 and base.requires_grad):
            out._requires_grad = True
            out._grad_fn = Node(name, backward, [base], attrs, save_inputs=False)
    return out


def _reshape_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (reshape(g, ctx.input_shapes[0]),)


def _view_strides(t: Tensor, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides for viewing t as `shape` without a copy, or None (PyTorch's computeStride)."""
    if t.is_contiguous():
        return contiguous_strides(shape)
    old_shape, old_strides = t.shape, t._strides
    numel = t.numel()
    if numel == 0:
        return contiguous_strides(shape)
    new_strides = [0] * len(shape)
    view_d = len(shape) - 1
    chunk_base_stride = old_strides[-1] if old_strides else 1
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1 and
                             old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def _infer_shape(t: Tensor, shape: tuple[int, ...], op: str) -> tuple[int, ...]:
    numel = t.numel()
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        rest = 1
        for s in shape:
            if s != -1:
                rest *= s
        if rest == 0 or numel % rest:
            raise ShapeError(f"{op}: shape {shape} is invalid for a tensor of shape {t.shape} ({numel} elements)")
        shape = tuple(numel // rest if s == -1 else s for s in shape)
    total = 1
    for s in shape:
        if s < 0:
            raise ShapeError(f"{op}: negative size in {shape}")
        total *= s
    if total != numel:
        raise ShapeError(f"{op}: shape {shape} is invalid for a tensor of shape {t.shape} ({numel} elements)")
    return shape


def view(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    shape = _infer_shape(t, shape, "view")
    if shape == t.shape:
        return t if not t.requires_grad else _view(t, shape, t._strides, t._offset, "view", _reshape_back, {})
    strides = _view_strides(t, shape)
    if strides is None:
        raise ShapeError(f"view: shape {shape} is not compatible with the strides {t._strides} of a tensor of "
                         f"shape {t.shape}; use reshape() (which copies when it must)")
    return _view(t, shape, strides, t._offset, "view", _reshape_back, {})


def reshape(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    shape = _infer_shape(t, shape, "reshape")
    if shape == t.shape:
        return t
    strides = _view_strides(t, shape)
    if strides is None:
        t = t.contiguous()
        strides = contiguous_strides(shape)
    return _view(t, shape, strides, t._offset, "reshape", _reshape_back, {})


def flatten(t: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if t.ndim == 0:
        return reshape(t, (1,))
    s, e = normalize_dim("flatten", start_dim, t.ndim), normalize_dim("flatten", end_dim, t.ndim)
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    mid = 1
    for d in t.shape[s:e + 1]:
        mid *= d
    return reshape(t, (*t.shape[:s], mid, *t.shape[e + 1:]))


def unflatten(t: Tensor, dim: int, sizes: tuple[int, ...]) -> Tensor:
    d = normalize_dim("unflatten", dim, t.ndim)
    return reshape(t, (*t.shape[:d], *sizes, *t.shape[d + 1:]))


def _permute_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    dims = ctx.attrs["dims"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return (permute(g, tuple(inverse)),)


def permute(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    if len(dims) != t.ndim:
        raise ShapeError(f"permute: got {len(dims)} dims {dims} for a tensor with {t.ndim} dims (shape {t.shape})")
    dims = tuple(normalize_dim("permute", d, t.ndim) for d in dims)
    if sorted(dims) != list(range(t.ndim)):
        raise ShapeError(f"permute: {dims} is not a permutation of 0..{t.ndim - 1}")
    if dims == tuple(range(t.ndim)):
        return t
    return _view(t, tuple(t.shape[d] for d in dims), tuple(t._strides[d] for d in dims), t._offset,
                 "permute", _permute_back, {"dims": dims})


def matrix_transpose(t: Tensor) -> Tensor:
    """t.mT, the last two dims swapped: the view GEMM code makes on every call and in every backward, so
    built directly rather than through permute's general checks (which cost several times the view)."""
    n = t.ndim
    if n < 2:
        return transpose(t, -2, -1)  # its error for fewer than 2 dims
    shape, strides = t.shape, t._strides
    return _view(t, (*shape[:-2], shape[-1], shape[-2]), (*strides[:-2], strides[-1], strides[-2]), t._offset,
                 "permute", _permute_back, {"dims": (*range(n - 2), n - 1, n - 2)})


def transpose(t: Tensor, dim0: int, dim1: int) -> Tensor:
    if t.ndim < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return t
    d0, d1 = normalize_dim("transpose", dim0, t.ndim), normalize_dim("transpose", dim1, t.ndim)
    dims = list(range(t.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(t, tuple(dims))


def _expand_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    from .autograd.graph import _unbroadcast
    return (_unbroadcast(g, ctx.input_shapes[0]),)


def expand(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    if len(shape) < t.ndim:
        raise ShapeError(f"expand: target shape {shape} has fewer dims than the tensor's shape {t.shape}")
    lead = len(shape) - t.ndim
    new_shape, new_strides = [], []
    for i, size in enumerate(shape):
        if i < lead:
            if size < 0:
                raise ShapeError(f"expand: -1 is not allowed for a new leading dim in {shape}")
            new_shape.append(size)
            new_strides.append(0)
            continue
        own, stride = t.shape[i - lead], t._strides[i - lead]
        if size == -1 or size == own:
            new_shape.append(own)
            new_strides.append(stride)
        elif own == 1:
            new_shape.append(size)
            new_strides.append(0)
        else:
            raise ShapeError(f"expand: cannot expand shape {t.shape} to {shape} (dim {i}: {own} -> {size}); "
                             f"only size-1 dims can be expanded")
    if tuple(new_shape) == t.shape:
        return t
    return _view(t, tuple(new_shape), tuple(new_strides), t._offset, "expand", _expand_back, {})


def squeeze(t: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    if dim is None:
        dims = {i for i, s in enumerate(t.shape) if s == 1}
    else:
        dims = {normalize_dim("squeeze", d, t.ndim) for d in ((dim,) if isinstance(dim, int) else dim)}
        dims = {d for d in dims if t.ndim and t.shape[d] == 1}
    if not dims:
        return t
    shape = tuple(s for i, s in enumerate(t.shape) if i not in dims)
    strides = tuple(s for i, s in enumerate(t._strides) if i not in dims)
    return _view(t, shape, strides, t._offset, "squeeze", _reshape_back, {})


def drop_dims(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    """Remove size-1 dims known to be valid (sorted, normalized): the reductions' keepdim=False view."""
    shape = tuple(s for i, s in enumerate(t.shape) if i not in dims)
    strides = tuple(s for i, s in enumerate(t._strides) if i not in dims)
    return _view(t, shape, strides, t._offset, "squeeze", _reshape_back, {})


def unsqueeze(t: Tensor, dim: int) -> Tensor:
    d = normalize_dim("unsqueeze", dim, t.ndim + 1)
    stride = t._strides[d] * t.shape[d] if d < t.ndim else 1
    shape = (*t.shape[:d], 1, *t.shape[d:])
    strides = (*t._strides[:d], stride, *t._strides[d:])
    return _view(t, shape, strides, t._offset, "unsqueeze", _reshape_back, {})


# ---- indexing ----------------------------------------------------------------------------------

def _index_layout(t: Tensor, index: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """shape, strides, offset of t[index] for ints, slices (step > 0), None and Ellipsis."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(isinstance(i, (Tensor, list)) for i in index):
        raise RumusError("indexing with tensors or lists (advanced indexing) is not a view; use "
                         "rumus.index_select(x, dim, idx), rumus.gather or boolean masks with rumus.where")
    n_ell = sum(1 for i in index if i is Ellipsis)
    if n_ell > 1:
        raise RumusError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    if consumed > t.ndim:
        raise ShapeError(f"too many indices for a tensor of shape {t.shape}: {index}")
    if n_ell:
        pos = index.index(Ellipsis)
        index = index[:pos] + (slice(None),) * (t.ndim - consumed) + index[pos + 1:]
    shape, strides, offset, d = [], [], t._offset, 0
    for item in index:
        if item is None:
            shape.append(1)
            strides.append(t._strides[d] * t.shape[d] if d < t.ndim else 1)
            continue
        size, stride = t.shape[d], t._strides[d]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step <= 0:
                raise RumusError(f"slice step must be positive, got {item.step}; use rumus.flip for reversal")
            length = max(0, (stop - start + step - 1) // step)
            shape.append(length)
            strides.append(stride * step)
            offset += start * stride if length else 0
        else:
            try:
                i = int(item.__index__())
            except (AttributeError, TypeError):
                raise RumusError(f"unsupported index {item!r} of type {type(item).__name__}") from None
            if not -size <= i < size:
                raise IndexOutOfRange(f"index {i} is out of bounds for dim {d} with size {size} (shape {t.shape})")
            offset += (i % size) * stride
        d += 1
    shape.extend(t.shape[d:])
    strides.extend(t._strides[d:])
    return tuple(shape), tuple(strides), offset


def _getitem_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    from . import _creation
    z = _creation.zeros(ctx.input_shapes[0], dtype=g.dtype, device=g.device)
    shape, strides, offset = _index_layout(z, ctx.attrs["index"])
    from . import _math  # late binding: copy_into, in the op layer above the views
    _math.copy_into(make_tensor(z._storage, shape, strides, offset), g)
    return (z,)


def getitem(t: Tensor, index: Any) -> Tensor:
    if _advanced_index.is_advanced(index):
        return _advanced_index.getitem(t, index)
    shape, strides, offset = _index_layout(t, index)
    return _view(t, shape, strides, offset, "getitem", _getitem_back, {"index": index})


def raw_index(t: Tensor, index: Any) -> Tensor:
    """t[index] as a plain view with no autograd (used to write into slices)."""
    shape, strides, offset = _index_layout(t, index)
    return make_tensor(t._storage, shape, strides, offset)


def _dim_slice(t: Tensor, dim: int, start: int, length: int) -> tuple[Any, ...]:
    return (slice(None),) * dim + (slice(start, start + length),)


def narrow(t: Tensor, dim: int, start: int, length: int) -> Tensor:
    d = normalize_dim("narrow", dim, t.ndim)
    if start < 0:
        start += t.shape[d]
    if not (0 <= start and length >= 0 and start + length <= t.shape[d]):
        raise ShapeError(f"narrow: start {start} + length {length} exceeds dim {d} of size {t.shape[d]}")
    return getitem(t, _dim_slice(t, d, start, length))


def select(t: Tensor, dim: int, i: int) -> Tensor:
    d = normalize_dim("select", dim, t.ndim)
    return getitem(t, (slice(None),) * d + (i,))


def split(t: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    d = normalize_dim("split", dim, t.ndim)
    n = t.shape[d]
    if isinstance(split_size, int):
        if split_size <= 0:
            raise ShapeError(f"split: split_size must be positive, got {split_size}")
        sizes = [min(split_size, n - s) for s in range(0, n, split_size)] or [0]
    else:
        sizes = list(split_size)
        if sum(sizes) != n:
            raise ShapeError(f"split: sizes {sizes} do not add up to {n} (dim {d} of shape {t.shape})")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(t, d, start, s))
        start += s
    return tuple(out)


def chunk(t: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
    d = normalize_dim("chunk", dim, t.ndim)
    size = -(-t.shape[d] // chunks) if t.shape[d] else 1
    return split(t, size, d)
