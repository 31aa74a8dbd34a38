"""What autocast does to one op's inputs: the class the op's schema declares decides the dtype.

- "lower":   float32 / float16 / bfloat16 inputs are cast to the autocast dtype (GEMMs, convolutions,
             attention: the ops that gain from lower precision);
- "float32": float16 / bfloat16 inputs are cast to float32 (reductions, norms, losses, exp/log/pow:
             the ops whose range or accumulated error needs float32);
- "promote": float inputs of different dtypes are cast to the widest of them (ops that would refuse
             a mix);
- None:      inputs are left alone (the op runs in whatever dtype it is given).
float64 is never lowered, and only tensors on the autocast's device type are touched (PyTorch's rules).
Casts are ordinary differentiable `copy` ops, so gradients flow back in each input's own dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rumus_contracts import DType, OpSchema, float32, parse_dtype, promote

from .._math import cast
from .._thread_state import autocast_state
from ..autograd.grad_mode import state as grad_state
from ..tensor import Tensor

_LOWERABLE = frozenset({"float32", "float16", "bfloat16"})
_WIDENABLE = frozenset({"float16", "bfloat16"})


def cast_inputs(schema: OpSchema, args: Sequence[Any]) -> Sequence[Any]:
    """`args` with the casts the schema's autocast class asks for (called by the dispatcher only
    while autocast is enabled, for ops that declare a class)."""
    cls = schema.autocast
    if autocast_state.device_type is not None:
        if any(isinstance(a, Tensor) and _on_autocast_device(a) for a in args):
            autocast_state.ops_on_device += 1
        elif any(isinstance(a, Tensor) for a in args):
            autocast_state.ops_elsewhere += 1
    if cls == "lower":
        target, eligible = parse_dtype(autocast_state.dtype), _LOWERABLE
    elif cls == "float32":
        target, eligible = float32, _WIDENABLE
    else:  # "promote"
        floats = {a.dtype for a in args if isinstance(a, Tensor) and a.dtype.is_floating}
        if len(floats) < 2:
            return args
        it = iter(floats)
        target = next(it)
        for d in it:
            target = promote(target, d)
        eligible = frozenset(d.name for d in floats)
    out = list(args)
    changed = False
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and a.dtype.name in eligible and a.dtype != target and _on_autocast_device(a):
            out[i] = cached_cast(a, target)
            changed = True
    return out if changed else args


def follow(t: Tensor, like: Tensor) -> Tensor:
    """`t` cast to `like`'s dtype when autocast produced `like` in the lower dtype — for a bias added
    after a lowered GEMM or convolution (PyTorch's linear/conv take the bias in the same dtype)."""
    st = autocast_state
    if (st.enabled and like.dtype != t.dtype and like.dtype.name == st.dtype and t.dtype.name in _LOWERABLE
            and _on_autocast_device(t)):
        return cached_cast(t, like.dtype)
    return t


def _on_autocast_device(t: Tensor) -> bool:
    dt = autocast_state.device_type
    return dt is None or t._storage.device.backend == dt


def cached_cast(t: Tensor, target: DType) -> Tensor:
    """Cast; parameters (leaves that require grad) are cast once per autocast region and reused while
    their version and the grad mode are unchanged (a cast made under no_grad has no graph)."""
    st = autocast_state
    if not (st.cache_enabled and t._requires_grad and t.grad_fn is None):
        return cast(t, target)
    key = (id(t), target.name)
    hit = st.cache.get(key)
    version, grad_on = t._storage.version, grad_state.enabled
    if hit is not None and hit[0] is t and hit[1] == version and hit[2] == grad_on:
        node = hit[3].grad_fn
        if node is None or not node.released:  # a graph already used by a backward is not reused
            return hit[3]  # type: ignore[no-any-return]
    out = cast(t, target)
    st.cache[key] = (t, version, grad_on, out)  # holding t keeps its id from being reused
    return out


def for_op(name: str, *tensors: Tensor) -> tuple[Tensor, ...]:
    """`tensors` as op `name`'s autocast class wants them: for the core's Python entry points that compute
    an op without dispatching it by name (rm.cumsum runs a scan of adds), so its schema still decides."""
    if not autocast_state.enabled:
        return tensors
    from ..ops import get
    schema = get(name).schema
    return tuple(cast_inputs(schema, tensors)) if schema.autocast is not None else tensors
