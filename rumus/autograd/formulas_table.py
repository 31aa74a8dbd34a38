"""Backward formulas of the expression-table ops (rumus_contracts.ops.expressions), one per op with
a `grad` entry, generated from the table: each derivative is written once, there.

d op / d input is the fused backward kernel `g * derivative` when the tensor's backend has it (one
kernel instead of a chain of core ops); otherwise, and always under create_graph (so higher
derivatives are exact: the fused op is differentiable in grad only), the same expression evaluated
with core ops. Constant derivatives need no kernel: "1" passes g through, "0" gives zeros.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rumus_contracts.ops.expr_lang import python_function
from rumus_contracts.ops.expressions import EXPRESSIONS, Expr, backward_name, backward_ops

from .. import _creation
from .. import _math as M
from .._dispatch import _scalar_dtype, scalar_tensor
from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula
from . import kernel_lookup  # has_kernel, looked up per call (tests swap it)
from .grad_mode import state as grad_state
from .graph import Context

_INV_SQRT2 = 1.0 / math.sqrt(2.0)

# the expression language's functions as core ops
FUNCTIONS: dict[str, Callable[..., Tensor]] = {
    "exp": M.exp, "log": M.log, "sqrt": M.sqrt, "rsqrt": M.rsqrt, "sin": M.sin, "cos": M.cos, "tanh": M.tanh,
    "sigmoid": M.sigmoid, "abs": M.abs, "pow": M.pow, "max": M.maximum, "min": M.minimum,
    "phi": lambda x: M.mul(M.add(_op("erf")(M.mul(x, _INV_SQRT2)), 1.0), 0.5),
    "truthy": lambda x: M.ne(x, 0),
    **{f: (lambda name: lambda *a: _op(name)(*a))(f)
       for f in ("log1p", "expm1", "erf", "floor", "ceil", "trunc", "fmod", "atan2", "isnan", "isinf", "isfinite")},
    "rint": lambda x: _op("round")(x),
}


class _CoreOps:
    """The expression language's primitives as differentiable core ops (expr_lang.PythonRenderer);
    constants become 0-d tensors of the inputs' dtype, on their device."""

    add, sub, mul, div, neg = staticmethod(M.add), staticmethod(M.sub), staticmethod(M.mul), staticmethod(M.div), \
        staticmethod(M.neg)
    lt, le, gt, ge, eq, ne = (staticmethod(f) for f in (M.lt, M.le, M.gt, M.ge, M.eq, M.ne))
    where, logical_and, logical_or, logical_not = (staticmethod(f) for f in (M.where, M.logical_and,
                                                                           M.logical_or, M.logical_not))
    fn = FUNCTIONS

    def __init__(self, like: Tensor) -> None:
        self.like = like

    @staticmethod
    def floor_divide(a: Tensor, b: Tensor) -> Tensor:
        return _op("floor_divide")(a, b)

    @staticmethod
    def remainder(a: Tensor, b: Tensor) -> Tensor:
        return _op("remainder")(a, b)

    def const(self, v: float) -> Tensor:
        return scalar_tensor(v, _scalar_dtype(v, self.like.dtype), self.like.device)

    @staticmethod
    def result(r: Tensor) -> Tensor:
        return r


def core_evaluator(e: Expr) -> Callable[..., Tensor]:
    """fn(*input tensors, **params) -> tensor: the expression evaluated with differentiable core ops."""
    return python_function(e, lambda *inputs: _CoreOps(inputs[-1]))


def _register(op: str, e: Expr) -> None:
    fused = {wrt: backward_name(op, wrt) for wrt, d in e.grad.items() if d.strip() not in ("0", "1")}
    slow = {name: core_evaluator(be) for name, (fwd, _, be) in backward_ops().items() if fwd == op}
    params = tuple(e.params)

    def forward_formula(ctx: Context, g: Tensor) -> tuple[Tensor | None, ...]:
        inputs = ctx.inputs
        attrs = {n: ctx.attrs[n] for n in params}
        grads: list[Tensor | None] = []
        for k, wrt in enumerate(e.inputs):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
            elif wrt not in fused:
                grads.append(g if e.grad[wrt].strip() == "1" else _creation.zeros_like(g))
            elif not grad_state.enabled and kernel_lookup.has_kernel(fused[wrt], inputs[k]):
                grads.append(_op(fused[wrt])(g, *inputs, **attrs))
            else:
                grads.append(slow[fused[wrt]](g, *inputs, **attrs))
        return tuple(grads)

    formula(op, inputs=True)(forward_formula)
    for name in fused.values():
        _register_fused(name, params, len(e.inputs))


def _register_fused(name: str, params: tuple[str, ...], n_inputs: int) -> None:
    def backward_formula(ctx: Context, gg: Tensor) -> tuple[Tensor | None, ...]:
        # g * f'(x) is linear in g: its gradient is the same op applied to the incoming one
        return (_op(name)(gg, *list(ctx.inputs)[1:], **{n: ctx.attrs[n] for n in params}), *([None] * n_inputs))

    formula(name, inputs=True)(backward_formula)


for _op_name, _expr in EXPRESSIONS.items():
    if _expr.grad:
        _register(_op_name, _expr)
    if _expr.grad_out is not None:  # the forward's formula is formulas.py's (from the output); the fused op's here
        _register_fused(backward_name(_op_name, "x"), tuple(_expr.params), 1)
