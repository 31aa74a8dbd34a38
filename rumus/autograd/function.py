"""torch.autograd.Function-style custom ops: forward over tensors, backward over tensors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rumus_contracts import AutogradError

from .._tensor_base import Tensor
from .grad_mode import no_grad
from .grad_mode import state as grad_state
from .graph import Context, Node


def attach_outputs(node: Node, outs: Sequence[Any]) -> None:
    """Make the floating-point tensors among `outs` (a forward's results, in order) the outputs of `node`,
    for a Python-level backward (custom Functions, checkpoint) that computed them under no_grad."""
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and o.dtype.is_floating:
            o.requires_grad = True
            o.grad_fn = node
            o._output_nr = i


class FunctionCtx:
    def __init__(self) -> None:
        self.saved_tensors: tuple[Tensor, ...] = ()
        self.needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors: Tensor) -> None:
        self.saved_tensors = tensors


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call with `.apply(*args)`."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any) -> Any:
        ctx = FunctionCtx()
        tensors = [a for a in args if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args)
        if not (grad_state.enabled and any(t.requires_grad for t in tensors)):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

        def formula(node_ctx: Context, *grads: Any) -> list[Any]:
            res = cls.backward(ctx, *grads)
            res = res if isinstance(res, tuple) else (res,)
            if len(res) != len(args):
                raise AutogradError(f"{cls.__name__}.backward returned {len(res)} values for {len(args)} inputs")
            return [res[i] for i in positions]

        attach_outputs(Node(cls.__name__, formula, tensors, {}, num_outputs=len(outs), save_inputs=False), outs)
        return out
