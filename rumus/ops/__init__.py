"""`rumus.ops.<name>`: every registered op (the core's and every plugin's), called straight through the
dispatcher with kernel-level attributes (reductions take sorted `dims` and return keepdim shapes).
The friendlier signatures (`rumus.sum(x, dim, keepdim)`) live in the top-level namespace."""

from __future__ import annotations

from typing import Any

from .._dispatch_plans import PlannedOp as Op
from .._tensor_base import Tensor
from .._runtime import plugins

_ops: dict[str, Op] = {}


def get(name: str) -> Op:
    op = _ops.get(name)
    if op is None:
        op = _ops[name] = Op(plugins().ops.get(name))
    return op


def call(name: str, *inputs: Any, **attrs: Any) -> tuple[Tensor, ...]:
    """Run any op by name; always returns the tuple of outputs (empty for in-place ops)."""
    return get(name).multi(*inputs, **attrs)


def names() -> list[str]:
    return plugins().ops.names()


def __getattr__(name: str) -> Op:
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        op = get(name)
    except Exception as exc:
        raise AttributeError(f"rumus.ops has no op '{name}' ({exc})") from None
    globals()[name] = op  # later lookups skip __getattr__
    return op
