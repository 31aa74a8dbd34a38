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
from typing import Any

from rumus_contracts.ops.expr_lang import Renderer
from rumus_contracts.ops.expressions import EXPRESSIONS, Expr, backward_name, backward_ops

from .. import _creation
from .. import _math as M
from .._dispatch import _scalar_dtype, scalar_tensor
from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula
from . import formulas_act_index as _act  # has_kernel, looked up per call (tests swap it)
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
_CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


class CoreRenderer(Renderer):
    """Renders an expression as Python over core ops (M.*, FUNCTIONS); constants take x's dtype (K)."""

    def const(self, v: float) -> str: return f"K({v!r})"
    def neg(self, a: str) -> str: return f"M.neg({a})"

    def binop(self, op: str, a: str, b: str) -> str:
        fn = {"+": "M.add", "-": "M.sub", "*": "M.mul", "/": "M.div", "//": "OP('floor_divide')",
              "%": "OP('remainder')"}[op]
        return f"{fn}({a}, {b})"

    def cmp(self, op: str, a: str, b: str) -> str: return f"M.{_CMP[op]}({a}, {b})"
    def bool_cmp(self, op: str, a: str, b: str) -> str: return f"M.{_CMP[op]}({a}, {b})"
    def logic(self, op: str, a: str, b: str) -> str: return f"M.logical_{op}({a}, {b})"
    def not_(self, a: str) -> str: return f"M.logical_not({a})"
    def select(self, c: str, a: str, b: str) -> str: return f"M.where({c}, {a}, {b})"
    def call(self, fn: str, args: list[str]) -> str: return f"F[{fn!r}]({', '.join(args)})"


def core_evaluator(e: Expr) -> Callable[..., Tensor]:
    """fn(*input tensors, **params) -> tensor: the expression evaluated with differentiable core ops."""
    lets, (res, typ) = CoreRenderer().render(e.body, {n: n for n in (*e.inputs, *e.params)})
    if typ == "c":
        res = f"K({res})"
    like = e.inputs[-1]
    lines = [f"    K = lambda v: scalar_tensor(v, _scalar_dtype(v, {like}.dtype), {like}.device)"]
    lines += [f"    {n} = {v}" for n, v, _ in lets] + [f"    return {res}"]
    namespace: dict[str, Any] = {"M": M, "F": FUNCTIONS, "OP": _op, "scalar_tensor": scalar_tensor,
                                 "_scalar_dtype": _scalar_dtype}
    exec(f"def fn({', '.join([*e.inputs, *e.params])}):\n" + "\n".join(lines), namespace)  # the table's text only
    fn: Callable[..., Tensor] = namespace["fn"]
    return fn


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
            elif not grad_state.enabled and _act.has_kernel(fused[wrt], inputs[k]):
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
