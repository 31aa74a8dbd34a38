"""Tensor hooks with PyTorch's semantics (`Tensor.register_hook`, `retain_grad`,
`register_post_accumulate_grad_hook`).

A grad hook is called with the gradient flowing into its tensor and may return a replacement (None keeps
it). A leaf's hooks run before the gradient is accumulated into `.grad`; a non-leaf's (a tensor some op
produced) are kept on that op's graph node per output slot and run once the tensor's total gradient is
known, before it flows further back. `retain_grad()` on a non-leaf is one more hook that stores the
gradient in `.grad`; it runs after the others, as PyTorch's does. A post-accumulate hook is called with
the leaf itself after its `.grad` was accumulated (the distributed bucketing listens there).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

GradHook = Callable[[Any], Any]


class RemovableHandle:
    """What register_hook returns: `.remove()` takes the hook out (again is a no-op), like torch's."""

    __slots__ = ("_hooks", "_entry")

    def __init__(self, hooks: list[Any], entry: Any) -> None:
        self._hooks: list[Any] | None = hooks
        self._entry = entry

    def remove(self) -> None:
        if self._hooks is not None:
            for i, e in enumerate(self._hooks):
                if e is self._entry:
                    del self._hooks[i]
                    break
            self._hooks = None

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class _Entry:
    """One registered hook: kind "grad", "retain" (the last to run) or "post" (leaves, after accumulation)."""

    __slots__ = ("kind", "fn")

    def __init__(self, kind: str, fn: Callable[[Any], Any]) -> None:
        self.kind, self.fn = kind, fn


def add(hooks: list[Any], kind: str, fn: Callable[[Any], Any]) -> RemovableHandle:
    entry = _Entry(kind, fn)
    hooks.append(entry)
    return RemovableHandle(hooks, entry)


def retainer(tensor: Any) -> Callable[[Any], None]:
    """The hook retain_grad() registers: the gradient into `.grad` (accumulated over backward calls, as
    PyTorch does), the tensor held weakly so the graph does not keep it alive."""
    ref = weakref.ref(tensor)

    def retain(g: Any) -> None:
        t = ref()
        if t is not None:
            g = g if g.grad_fn is not None else g.detach()
            t.grad = g if t.grad is None else t.grad + g
    return retain


def run_grad_hooks(hooks: list[Any] | None, g: Any) -> Any:
    """g through the grad hooks in registration order (retain_grad's last), each result replacing g."""
    if not hooks:
        return g
    for e in [e for e in hooks if e.kind == "grad"]:
        out = e.fn(g)
        if out is not None:
            _check_replacement(g, out)
            g = out
    for e in [e for e in hooks if e.kind == "retain"]:
        e.fn(g)
    return g


def run_post_hooks(hooks: list[Any] | None, leaf: Any) -> None:
    for e in [e for e in hooks or () if e.kind == "post"]:
        e.fn(leaf)


def _check_replacement(g: Any, out: Any) -> None:
    from rumus_contracts import AutogradError, ShapeError
    from .._tensor_base import Tensor  # the run-time class for isinstance (see _tensor_base)
    if not isinstance(out, Tensor):
        raise AutogradError(f"a tensor hook returned {type(out).__name__}; it must return a Tensor or None")
    if tuple(out.shape) != tuple(g.shape):
        raise ShapeError(f"hook returned a gradient of shape {tuple(out.shape)} for a gradient of shape "
                         f"{tuple(g.shape)}")
