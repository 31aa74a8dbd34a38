"""Calling the fixed-point ops: straight through the core's dispatcher (`rumus.ops`), so schema rules,
the kernel registry and KernelNotFound (e.g. on WebGPU, which has no fixed-point kernels) are the
shared ones. Fixed-point ops declare no differentiable inputs, so no autograd node is ever built."""

from __future__ import annotations

from typing import Any

from .. import ops
from ..tensor import Tensor


def call(name: str, *inputs: Tensor, **attrs: Any) -> Tensor:
    """Run op `name` on `inputs`; returns its single output (a new contiguous tensor)."""
    out = ops.get(name)(*inputs, **attrs)
    assert isinstance(out, Tensor)  # every fixed-point op has exactly one output
    return out
