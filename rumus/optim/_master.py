"""Mixed-precision helpers of Optimizer: float32 master copies, and an update that a device flag undoes.

A step the GradScaler must skip (inf/NaN gradients) is still run by an optimizer with no fused form
that reads the flag, then every tensor it wrote is put back with `where(flag, before, after)` on the
device: the host never learns whether it was skipped. Adam and AdamW need none of it: their fused kernel
reads the flag (rumus/optim/adam.py). Host-side counters of the other optimizers (NAdam's, RAdam's,
Adamax's `step`) do advance on a skipped step.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import float32

from .._math import where
from ..tensor import Tensor

_LOW = ("float16", "bfloat16")


def master_of(p: Tensor, state: dict[str, Any]) -> None:
    """Give a float16/bfloat16 parameter its float32 master copy in `state` (once)."""
    if p.dtype.name in _LOW and "master_param" not in state:
        state["master_param"] = p.detach().to(float32).contiguous()


def fresh_state_value(key: str, group: dict[str, Any]) -> float:
    """The value a state tensor made by a first step starts from (zeros, but Adagrad's sum)."""
    if key == "sum" and "initial_accumulator_value" in group:
        return float(group["initial_accumulator_value"])
    return 0.0


def update_unless(skip: Tensor, optimizer: Any, target: Tensor, grad: Tensor, group: dict[str, Any],
                  state: dict[str, Any]) -> None:
    """optimizer._update(target, grad, group, state), then every write undone where `skip` (a bool 0-d
    device tensor) is true."""
    before = {k: v.clone() for k, v in state.items() if isinstance(v, Tensor) and k != "master_param"}
    saved_target = target.clone()
    optimizer._update(target, grad, group, state)
    target.copy_(where(skip, saved_target, target))
    for k, v in state.items():
        if not isinstance(v, Tensor) or k == "master_param":
            continue
        old = before.get(k)
        if old is None:  # made by this (first) step: back to its starting value
            v.copy_(where(skip, fresh_state_value(k, group), v))
        else:
            v.copy_(where(skip, old, v))
