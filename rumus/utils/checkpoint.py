"""Activation checkpointing: run a function without keeping its graph, recompute it during backward.

The forward runs under no_grad (nothing inside is saved); one graph node stands for the whole call. Its
backward re-runs the function with gradients on (restoring the random generator's state first, so
dropout draws the same masks), backpropagates through the fresh graph — parameters used inside
accumulate their .grad as usual — and hands the inputs' gradients on. Parameters receive gradients
even when no input requires grad.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rumus_contracts import AutogradError

from ..autograd.function import attach_outputs
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import Context, Node, run_backward
from ..random import default_generator
from ..tensor import Tensor


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """function(*args, **kwargs), recomputed in backward instead of stored. Tensor positional arguments get
    gradients; tensors passed through kwargs are treated as constants."""
    if not grad_state.enabled:
        return function(*args, **kwargs)
    rng_before = default_generator.get_state() if preserve_rng_state else None
    with no_grad():
        out = function(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    inputs = [args[i] for i in positions]
    versions = [t._storage.version for t in inputs]

    def formula(ctx: Context, *grads: Tensor | None) -> list[Tensor | None]:
        for t, v in zip(inputs, versions):
            if t._storage.version != v:
                raise AutogradError(f"checkpoint: an input of shape {t.shape} was modified in place after the "
                                    f"forward pass, so the recomputation would differ; clone() it first")
        fresh = list(args)
        for i in positions:
            d = args[i].detach()
            if args[i].requires_grad:
                d.requires_grad_(True)
            fresh[i] = d
        rng_after = default_generator.get_state() if rng_before is not None else None
        if rng_before is not None:
            default_generator.set_state(rng_before)
        try:
            with enable_grad():
                again = function(*fresh, **kwargs)
        finally:
            if rng_after is not None:
                default_generator.set_state(rng_after)
        again_outs = again if isinstance(again, tuple) else (again,)
        roots, root_grads = [], []
        for o, g in zip(again_outs, grads):
            if isinstance(o, Tensor) and o.requires_grad and g is not None:
                roots.append(o)
                root_grads.append(g)
        if roots:
            run_backward(roots, root_grads, retain_graph=False, create_graph=False)
        return [fresh[i].grad if args[i].requires_grad else None for i in positions]

    attach_outputs(Node("checkpoint", formula, inputs, {}, num_outputs=len(outs), save_inputs=False), outs)
    return out


def checkpoint_sequential(functions: Sequence[Callable[[Any], Any]], segments: int, input: Any,
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Split a sequence of modules/functions into `segments` checkpointed chunks (the last runs normally)."""
    fns = list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be >= 1, got {segments}")
    size = max(len(fns) // segments, 1)

    def run(chunk: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            for fn in chunk:
                x = fn(x)
            return x
        return f

    start = 0
    while start + size < len(fns):
        input = checkpoint(run(fns[start:start + size]), input, **kwargs)
        start += size
    return run(fns[start:])(input)
