"""In-place writes and autograd, PyTorch's way.

* Every tracked in-place op REBASES the written tensor's history: the op becomes its new grad_fn
  (`y = x*2; y.fill_(0)` -> y's gradient no longer reaches x).
* In-place on a view rebases the view's base (PyTorch's CopySlices): the base's new grad_fn sends
  the gradient of the written region to the op's result and the rest to the base's old history.
* A view made in grad mode records the storage version it was made at; once an in-place op has
  moved the version on, its grad_fn/requires_grad are recomputed from the base's current history
  (see Tensor.grad_fn), so a view taken before the write and used after it is never wrong.
* Saved tensors the write would destroy are copied first; any other saved tensor of the same
  storage is caught by the version check at backward time (an error, never a wrong gradient).

Cases PyTorch refuses are refused with an AutogradError naming the way out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import AutogradError, RumusError, ShapeError

from .autograd.grad_mode import no_grad
from .autograd.grad_mode import state as grad_state
from .autograd.graph import Context, Node
from ._tensor_base import Tensor


def refuse_fixed(x: Tensor, name: str) -> None:
    if x.dtype.is_fixed:
        raise RumusError(f"{name} is refused on a fixed-point tensor: in-place writes to fixed-point "
                         f"tensors are not allowed (build a new tensor with rumus.fixed.tensor)")


def check_writable(x: Tensor, name: str) -> None:
    """The refusals of a tracked in-place write into x (PyTorch's three rules)."""
    if x._base is None:
        if x._grad_fn is None and x._requires_grad:
            raise AutogradError(f"{name}: a leaf tensor that requires grad is used in an in-place operation; "
                                f"wrap the update in `with rumus.no_grad():` (as optimizers do)")
        return
    base = x._base
    if base._grad_fn is None and base._requires_grad:
        raise AutogradError(f"{name}: a view of a leaf tensor that requires grad is used in an in-place "
                            f"operation; wrap the update in `with rumus.no_grad():`, or clone() the leaf first")
    if x._view_version < 0:
        raise AutogradError(f"{name}: this view was made under no_grad() (or from a detached tensor) and is "
                            f"now written in grad mode: its base cannot record the write. Make the view in "
                            f"grad mode, or write under no_grad()")


# ---- where a view's elements sit in its base ----------------------------------------------------------

def _layout_positions(shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> np.ndarray:
    pos = np.full((), offset, dtype=np.int64)
    for size, stride in zip(shape, strides):
        pos = pos[..., None] + np.arange(size, dtype=np.int64) * stride
    return pos.reshape(-1)


def view_positions(v: Tensor, base: Tensor) -> np.ndarray:
    """For each element of v (row-major), its flat row-major index in base (int64)."""
    storage_pos = _layout_positions(v.shape, v._strides, v._offset)
    if base.is_contiguous():
        return storage_pos - base._offset
    inverse = np.full(base._storage.numel, -1, dtype=np.int64)
    inverse[_layout_positions(base.shape, base._strides, base._offset)] = np.arange(base.numel(), dtype=np.int64)
    pos: np.ndarray = inverse[storage_pos]
    if (pos < 0).any():
        raise AutogradError("a view reaches storage outside its base's elements; its gradient cannot be "
                            "recomputed after an in-place change (clone() the view before the write)")
    return pos


def _positions_tensor(ctx: Context, like: Tensor) -> Tensor:
    from ._creation import from_host
    from rumus_contracts import int64
    return from_host(ctx.attrs["positions"], int64, like.device)


def _view_of_base_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    """Backward of a view recomputed from its base: its gradient, summed into the base's positions."""
    from . import _creation
    from . import _indexing  # late binding: index_add, an op function above the in-place machinery
    base_shape = ctx.input_shapes[0]
    numel = int(np.prod(base_shape, dtype=np.int64))
    zeros = _creation.zeros(numel, dtype=g.dtype, device=g.device)
    flat = _indexing.index_add(zeros, 0, _positions_tensor(ctx, g), g.reshape(-1))
    return (flat.reshape(base_shape),)


def refresh_view(v: Tensor) -> None:
    """v's base was changed in place after v was made: take v's history from the base's current one."""
    base = v._base
    assert base is not None
    v._view_version = v._storage.version
    if not base.requires_grad:
        return  # nothing to differentiate through; v keeps what it has (a leaf of its own, or nothing)
    node = Node("as_strided", _view_of_base_back, [base], {"positions": view_positions(v, base)}, save_inputs=False)
    v._grad_fn = node
    v._requires_grad = True
    v._output_nr = 0


# ---- committing a write -----------------------------------------------------------------------------

def _zero_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    from ._creation import zeros_like
    return (zeros_like(g),)


def _copy_slices_back(ctx: Context, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    """Base's new history: the written region's gradient goes to the op's result, the rest to the
    base's old history."""
    from . import _indexing, _math  # late binding: op functions above the in-place machinery
    from ._creation import from_host
    from rumus_contracts import bool_
    pos = _positions_tensor(ctx, g)
    flat = g.reshape(-1)
    g_result = _indexing.index_select(flat, 0, pos).reshape(ctx.input_shapes[1]) if ctx.needs_input_grad[1] else None
    g_base = None
    if ctx.needs_input_grad[0]:
        mask = np.zeros(flat.shape[0], dtype=bool)
        mask[ctx.attrs["positions"]] = True
        written = from_host(mask.reshape(g.shape), bool_, g.device)
        g_base = _math.where(written, 0.0, g)
    return g_base, g_result


def _protect_saved(result: Tensor, x: Tensor) -> None:
    """The op that made `result` may have saved x (mul_ saves its input): keep a copy of what the
    write is about to destroy, so the op's backward still sees the values it was computed from."""
    node = result._grad_fn
    if node is None or not node.saved_inputs:
        return
    storage = x._storage
    saved = node.saved_inputs
    for i, (t, version) in enumerate(saved):
        if t._storage is storage and t._storage.version == version:
            with no_grad():
                saved[i] = (t.detach().clone(), 0)


def commit(x: Tensor, result: Tensor, name: str) -> Tensor:
    """Write `result` (same shape) into x's storage, bump the version, and rebase the history of x
    (or of its base, when x is a view) on the write."""
    refuse_fixed(x, name)
    if result.shape != x.shape:
        raise ShapeError(f"{name}: the result of shape {result.shape} cannot be written into a tensor of "
                         f"shape {x.shape}")
    from ._math import copy_into  # late binding: _math's in-place forms call commit(); it copies with _math
    if not (grad_state.enabled and (x.requires_grad or result.requires_grad)):
        copy_into(x, result)
        return x
    check_writable(x, name)
    base = x._base
    if base is None:
        history: Node | None = result._grad_fn
        if history is None or not result._requires_grad:
            # a constant overwrites x (fill_, copy_ of a constant): its old history gets zero gradient
            history = Node(name, _zero_back, [x], {}, save_inputs=False)
            out_nr = 0
        else:
            out_nr = result._output_nr
        _protect_saved(result, x)
        copy_into(x, result.detach())
        x._grad_fn, x._requires_grad, x._output_nr = history, True, out_nr
        return x
    positions = view_positions(x, base)
    if np.unique(positions).size != positions.size:
        raise AutogradError(f"{name}: the view written in place has elements that share memory (an expanded "
                            f"view); its gradient would be ill-defined. Write into a clone() instead")
    node = Node(f"{name}_on_view", _copy_slices_back, [base, result], {"positions": positions},
                save_inputs=False)
    _protect_saved(result, x)
    copy_into(x, result.detach())
    base._grad_fn, base._requires_grad, base._output_nr = node, True, 0
    # x itself is now stale (version moved on): its next grad_fn read recomputes it from base
    return x


# ---- fill_ / copy_ / item assignment ---------------------------------------------------------------------

def fill_(x: Tensor, value: Any) -> Tensor:
    refuse_fixed(x, "fill_")
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(f"fill_: the value must be a number or a 1-element tensor, got shape {value.shape}")
        return copy_(x, value.reshape(()))
    if grad_state.enabled and x.requires_grad:
        from ._creation import full
        return commit(x, full(x.shape, value, dtype=x.dtype, device=x.device), "fill_")
    from . import _runtime
    k = _runtime.kernel("fill", x._storage.backend, x.dtype)
    attrs = {"shape": x.shape, "value": value, "dtype": x.dtype.name}
    from . import _dispatch
    cap = _dispatch._capture  # rm.compile records kernels launched outside the dispatcher too (replaying, defers)
    if cap is None or not cap.record_direct("fill", k, [x], [], attrs):
        k([x._arg], [], attrs)
    x._storage.version += 1
    return x


def zero_(x: Tensor) -> Tensor:
    return fill_(x, 0)


def copy_(x: Tensor, src: Any) -> Tensor:
    """x.copy_(src): src broadcast to x's shape, cast to x's dtype, moved to x's device; differentiable."""
    refuse_fixed(x, "copy_")
    from . import _views
    from . import _math  # late binding: cast / to_device / copy_into, in the op layer above
    if not isinstance(src, Tensor):
        from ._creation import tensor
        src = tensor(src, dtype=x.dtype, device=x.device)
    if grad_state.enabled and (x.requires_grad or src.requires_grad):
        if src.device != x.device:
            src = _math.to_device(src, x.device)
        if src.dtype != x.dtype:
            src = _math.cast(src, x.dtype)
        if src.shape != x.shape:
            src = _views.expand(src, x.shape)
        return commit(x, src, "copy_")
    _math.copy_into(x, src)
    return x


def _drop_leading_ones(value: Tensor, ndim: int) -> Tensor:
    """torch's assignment rule: a value with more dims than its target loses its leading size-1 dims
    (`a[t] = v` with v [1, 1] into a [1] slot), then broadcasts as usual."""
    extra = value.ndim - ndim
    if extra <= 0 or any(s != 1 for s in value.shape[:extra]):
        return value
    return value.reshape(value.shape[extra:])


def setitem(x: Tensor, index: Any, value: Any) -> None:
    """x[index] = value. With autograd on and x or value requiring grad, the write is recorded
    (on x's base when x is a view)."""
    refuse_fixed(x, "item assignment")
    from . import _advanced_index, _views
    if _advanced_index.is_advanced(index):
        _advanced_index.setitem(x, index, value)
        return
    value_grad = isinstance(value, Tensor) and value.requires_grad
    if isinstance(value, Tensor):
        value = _drop_leading_ones(value, _views.raw_index(x, index).ndim)
    if not (grad_state.enabled and (x.requires_grad or value_grad)):
        target = _views.raw_index(x, index)
        if isinstance(value, Tensor):
            copy_(target, value)
        else:
            fill_(target, value)  # bumps the shared storage's version
        return
    check_writable(x, "item assignment")
    target = _views.getitem(x, index)  # a view made in grad mode: the write is recorded on the base
    if isinstance(value, Tensor):
        copy_(target, value)
    else:
        fill_(target, value)

