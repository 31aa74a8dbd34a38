"""Reverse-mode autograd: backward(), grad(), grad modes, custom Functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rumus_contracts import AutogradError, RumusError

from .._tensor_base import Tensor
from .function import Function
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .graph import run_backward

__all__ = ["Function", "Variable", "backward", "enable_grad", "grad", "inference_mode", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]


def _root_grads(outputs: Sequence[Tensor], grads: Sequence[Tensor | None] | None) -> list[Tensor]:
    from .._creation import ones_like  # late binding: creation ops sit above autograd's graph
    out = []
    for i, o in enumerate(outputs):
        g = grads[i] if grads is not None and i < len(grads) else None
        if g is None:
            if o.numel() != 1:
                raise AutogradError(f"backward() on a tensor of shape {o.shape} needs a gradient argument: "
                                    f"grad can be implicitly created only for scalar outputs (e.g. call "
                                    f".sum() first, or pass gradient=ones_like(out))")
            g = ones_like(o)
        elif g.shape != o.shape:
            raise AutogradError(f"gradient of shape {g.shape} does not match the output's shape {o.shape}")
        out.append(g)
    return out


def backward(tensors: Sequence[Tensor], grad_tensors: Sequence[Tensor | None] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False) -> None:
    for t in tensors:
        if not t.requires_grad:
            raise AutogradError("backward(): the tensor does not require grad and has no grad_fn; was it computed "
                                "under no_grad(), or from inputs without requires_grad=True?")
    run_backward(list(tensors), _root_grads(tensors, grad_tensors),
                 retain_graph if retain_graph is not None else create_graph, create_graph)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Sequence[Tensor | None] | None = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> tuple[Tensor | None, ...]:
    """Gradients of outputs w.r.t. inputs, returned rather than accumulated into .grad."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for t in ins:
        if not t.requires_grad:
            raise AutogradError("grad(): one of the inputs does not require grad")
    res = run_backward(outs, _root_grads(outs, grad_outputs),
                       retain_graph if retain_graph is not None else create_graph, create_graph, capture=ins)
    assert res is not None
    if not allow_unused and any(r is None for r in res):
        raise AutogradError("grad(): one of the inputs was not used in the graph; pass allow_unused=True")
    return tuple(res)


_: Any = RumusError


def Variable(data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # noqa: N802
    """torch.autograd.Variable (a tensor since torch 0.4): the same tensor, requiring grad if asked."""
    return data.requires_grad_(True) if requires_grad and not data.requires_grad else data
