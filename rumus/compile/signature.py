"""What a call must share with a captured one to replay it: the guard key, and the flattening of
arguments and results into tensors + structure."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rumus_contracts import RumusError

from ..autograd.grad_mode import state as grad_state
from ..tensor import Tensor


def flatten(obj: Any, out: list[Tensor]) -> Any:
    """The structure of `obj` with each tensor replaced by its index in `out` (tuples, lists, dicts)."""
    if isinstance(obj, Tensor):
        out.append(obj)
        return _Leaf(len(out) - 1)
    if isinstance(obj, (tuple, list)):
        return type(obj)(flatten(o, out) for o in obj)
    if isinstance(obj, dict):
        return {k: flatten(v, out) for k, v in obj.items()}
    return obj


def unflatten(tree: Any, values: list[Any]) -> Any:
    if isinstance(tree, _Leaf):
        return values[tree.index]
    if isinstance(tree, (tuple, list)):
        return type(tree)(unflatten(o, values) for o in tree)
    if isinstance(tree, dict):
        return {k: unflatten(v, values) for k, v in tree.items()}
    return tree


class _Leaf:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<tensor {self.index}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Leaf) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("leaf", self.index))


def signature(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Hashable, list[Tensor]]:
    """(guard key, the argument tensors in order). The key holds each tensor's shape, strides, offset,
    dtype, device and requires_grad, which arguments share a storage, every non-tensor argument's value
    (a different number captures again: numbers are constants of a capture), the grad mode, and the count
    of module train/eval flips (a step captured in training mode must not replay in eval mode)."""
    if not kwargs and all(type(a) is Tensor for a in args):  # the common call: tensors only, no tree to walk
        tensors = list(args)
        tree: Any = len(args)
    else:
        tensors = []
        tree = flatten((args, kwargs), tensors)
    first: dict[int, int] = {}
    metas = []
    for i, t in enumerate(tensors):
        sid = first.setdefault(id(t._storage), i)
        metas.append((t.shape, t._strides, t._offset, t.dtype, t.device, t.requires_grad, sid))
    from ..nn.module import MODE_CHANGES  # here, not at import: nn imports rm.compile's host regions
    try:
        key = (_freeze(tree), tuple(metas), grad_state.enabled, MODE_CHANGES[0])
        hash(key)
    except TypeError as exc:
        raise RumusError(f"rm.compile({name}): an argument cannot be part of the cache key ({exc}); pass tensors, "
                         f"numbers, strings, None, or tuples/lists/dicts of them") from None
    return key, tensors


def _freeze(tree: Any) -> Hashable:
    if isinstance(tree, (list, tuple)):
        return (type(tree).__name__, tuple(_freeze(o) for o in tree))
    if isinstance(tree, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in tree.items()))
    if isinstance(tree, (int, float, str, bool, type(None), _Leaf)):
        return (type(tree).__name__, tree)
    return ("obj", id(tree))  # a module or other object: the same object, by identity
