"""Backward formulas of the core ops, written with core ops so every backend gets gradients from its
forward kernels alone. Each returns one gradient per input (None where none flows); broadcast ops
return output-shaped gradients and the graph sums them down to each input's shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .. import _creation
from .. import _math as M
from .. import _views
from .._dispatch import FORMULAS
from ..ops import get as _op
from ..tensor import Tensor
from . import kernel_lookup  # has_kernel, looked up per call (tests swap it)
from .grad_mode import state as grad_state
from .graph import Context, _unbroadcast

F = TypeVar("F", bound=Callable[..., Any])


def formula(name: str, inputs: bool = False, outputs: bool = False) -> Callable[[F], F]:
    def register(fn: F) -> F:
        FORMULAS[name] = (fn, inputs, outputs)
        return fn
    return register


@formula("add")
def _add(ctx: Context, g: Tensor) -> tuple[Tensor, Tensor]:
    return g, g


@formula("sub")
def _sub(ctx: Context, g: Tensor) -> tuple[Tensor, Tensor]:
    return g, M.neg(g)


@formula("mul", inputs=True)
def _mul(ctx: Context, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    need_a, need_b = ctx.needs_input_grad
    return (M.mul(g, ctx.inputs[1]) if need_a else None), (M.mul(g, ctx.inputs[0]) if need_b else None)


@formula("div", inputs=True)
def _div(ctx: Context, g: Tensor) -> tuple[Tensor, Tensor | None]:
    b = ctx.inputs[1]
    ga = M.div(g, b)
    return ga, (M.neg(M.div(M.mul(ga, ctx.inputs[0]), b)) if ctx.needs_input_grad[1] else None)


@formula("pow", inputs=True, outputs=True)
def _pow(ctx: Context, g: Tensor) -> tuple[Tensor, Tensor]:
    """PyTorch's conventions where the chain rule meets 0 * inf: d(x**0)/dx is 0 (even at x = 0), and
    d(0**y)/dy is 0 for y >= 0 (log 0 = -inf times 0**y = 0)."""
    (a, b), (out,) = ctx.inputs, ctx.outputs
    ga = M.where(M.eq(b, 0), M.mul(g, 0.0), M.mul(g, M.mul(b, M.pow(a, M.sub(b, 1)))))
    gb = None
    if ctx.needs_input_grad[1]:
        gb = M.where(M.logical_and(M.eq(a, 0), M.ge(b, 0)), M.mul(g, 0.0), M.mul(g, M.mul(out, M.log(a))))
    return ga, gb  # type: ignore[return-value]


def _minmax(ctx: Context, g: Tensor, op: str) -> tuple[Tensor, Tensor]:
    a, b = ctx.inputs
    win = M.gt(a, b) if op == "max" else M.lt(a, b)
    tie = M.eq(a, b)
    half = M.mul(g, 0.5)
    zero = M.mul(g, 0.0)
    ga = M.where(win, g, M.where(tie, half, zero))
    gb = M.where(win, zero, M.where(tie, half, g))
    return ga, gb


@formula("maximum", inputs=True)
def _maximum(ctx: Context, g: Tensor) -> tuple[Tensor, Tensor]:
    return _minmax(ctx, g, "max")


@formula("minimum", inputs=True)
def _minimum(ctx: Context, g: Tensor) -> tuple[Tensor, Tensor]:
    return _minmax(ctx, g, "min")


@formula("neg")
def _neg(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.neg(g),)


@formula("abs", inputs=True)
def _abs(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.mul(g, M.sign(ctx.inputs[0])),)


@formula("exp", outputs=True)
def _exp(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.mul(g, ctx.outputs[0]),)


@formula("log", inputs=True)
def _log(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.div(g, ctx.inputs[0]),)


@formula("sqrt", outputs=True)
def _sqrt(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.div(M.mul(g, 0.5), ctx.outputs[0]),)


@formula("rsqrt", outputs=True)
def _rsqrt(ctx: Context, g: Tensor) -> tuple[Tensor]:
    y = ctx.outputs[0]
    return (M.mul(M.mul(g, -0.5), M.mul(y, M.mul(y, y))),)


@formula("sin", inputs=True)
def _sin(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.mul(g, M.cos(ctx.inputs[0])),)


@formula("cos", inputs=True)
def _cos(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.neg(M.mul(g, M.sin(ctx.inputs[0]))),)


def tanh_grad(g: Tensor, y: Tensor) -> Tensor:
    """g * (1 - y * y) from tanh's output y: the fused tanh_backward where y's backend has it and no graph is
    being built (it is differentiable in g only), else core ops, rounded in the same order."""
    if not grad_state.enabled and kernel_lookup.has_kernel("tanh_backward", y):
        return _op("tanh_backward")(g, y)
    return M.mul(g, M.sub(1.0, M.mul(y, y)))


def sigmoid_grad(g: Tensor, y: Tensor) -> Tensor:
    """g * (y * (1 - y)) from sigmoid's output y, as tanh_grad."""
    if not grad_state.enabled and kernel_lookup.has_kernel("sigmoid_backward", y):
        return _op("sigmoid_backward")(g, y)
    return M.mul(g, M.mul(y, M.sub(1.0, y)))


def relu_grad(g: Tensor, y: Tensor) -> Tensor:
    """relu's backward from its output y (y > 0 exactly where the input was): the fused relu_backward (a select,
    differentiable in g), or where(y > 0, g, 0) in core ops where y's backend lacks it."""
    if kernel_lookup.has_kernel("relu_backward", y):
        return _op("relu_backward")(g, y)
    return M.where(M.gt(y, 0), g, _creation.zeros_like(g))


@formula("tanh", outputs=True)
def _tanh(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (tanh_grad(g, ctx.outputs[0]),)


@formula("sigmoid", outputs=True)
def _sigmoid(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (sigmoid_grad(g, ctx.outputs[0]),)


@formula("clamp", inputs=True)
def _clamp(ctx: Context, g: Tensor) -> tuple[Tensor]:
    x = ctx.inputs[0]
    lo, hi = ctx.attrs["min"], ctx.attrs["max"]
    keep = g
    if lo is not None:
        keep = M.where(M.ge(x, lo), keep, 0.0)
    if hi is not None:
        keep = M.where(M.le(x, hi), keep, 0.0)
    return (keep,)


@formula("where", inputs=True)
def _where(ctx: Context, g: Tensor) -> tuple[None, Tensor, Tensor]:
    cond = ctx.inputs[0]
    return None, M.where(cond, g, 0.0), M.where(cond, 0.0, g)


@formula("copy")
def _copy(ctx: Context, g: Tensor) -> tuple[Tensor | None]:
    src = ctx.node.input_dtypes[0]
    if not src.is_floating:
        return (None,)
    return (g if g.dtype == src else M.cast(g, src),)


@formula("sum")
def _sum(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (_views.expand(g, ctx.input_shapes[0]),)


@formula("prod", inputs=True, outputs=True)
def _prod(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (M.div(M.mul(g, ctx.outputs[0]), ctx.inputs[0]),)


def _extremum(ctx: Context, g: Tensor) -> tuple[Tensor]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    mask = M.eq(x, out).to(g.dtype)
    count = M.sum_dims(mask, tuple(ctx.attrs["dims"]))
    return (M.mul(mask, M.div(g, count)),)


FORMULAS["amax"] = (_extremum, True, True)
FORMULAS["amin"] = (_extremum, True, True)


def _fused_backward(op: str, g: Tensor, y: Tensor, dim: int) -> Tensor | None:
    """The fused `op` (softmax_backward, ...) where y's backend has it and no graph of the backward is
    being built (the fused ops have no formulas of their own); None otherwise."""
    from ..ops import get as _op
    from .kernel_lookup import has_kernel
    from .grad_mode import state as grad_state
    if grad_state.enabled or g.dtype != y.dtype or not has_kernel(op, y):
        return None
    out: Tensor = _op(op)(g, y, dim=dim)
    return out


@formula("softmax", outputs=True)
def _softmax(ctx: Context, g: Tensor) -> tuple[Tensor]:
    y = ctx.outputs[0]
    dim = ctx.attrs["dim"]
    if y.ndim == 0:
        return (M.mul(g, 0.0),)
    fused = _fused_backward("softmax_backward", g, y, dim)
    if fused is not None:
        return (fused,)
    return (M.mul(y, M.sub(g, M.sum(M.mul(g, y), dim, keepdim=True))),)


@formula("log_softmax", outputs=True)
def _log_softmax(ctx: Context, g: Tensor) -> tuple[Tensor]:
    y = ctx.outputs[0]
    if y.ndim == 0:
        return (M.mul(g, 0.0),)
    fused = _fused_backward("log_softmax_backward", g, y, ctx.attrs["dim"])
    if fused is not None:
        return (fused,)
    return (M.sub(g, M.mul(M.exp(y), M.sum(g, ctx.attrs["dim"], keepdim=True))),)


def _column_major(t: Tensor) -> bool:
    return t.ndim >= 2 and t._strides[-2] == 1 and t._strides[-1] != 1


@formula("matmul", inputs=True)
def _matmul(ctx: Context, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    # Each gradient is produced in its operand's memory layout: for `x @ W.mT` (Linear) the weight's
    # gradient comes out as a transposed view of a contiguous [out, in] product, so after the view's
    # backward the leaf gradient is contiguous and optimizers never copy it.
    a, b = ctx.inputs
    need_a, need_b = ctx.needs_input_grad
    ga = gb = None
    if need_a:
        ga = M.matmul(b, g.mT).mT if _column_major(a) else M.matmul(g, b.mT)
        ga = _unbroadcast(ga, a.shape)
    if need_b:
        gb = M.matmul(g.mT, a).mT if _column_major(b) else M.matmul(a.mT, g)
        gb = _unbroadcast(gb, b.shape)
    return ga, gb


def _unused(*_: Any) -> None:
    return None


@formula("logsumexp", inputs=True, outputs=True)
def _logsumexp(ctx: Context, g: Tensor) -> tuple[Tensor]:
    # d/dx = exp(x - y): reached where a backend ran its fused logsumexp (elsewhere the composite's own ops
    # carry the gradient). Built from differentiable ops, so create_graph works.
    if not ctx.attrs["dims"]:
        return (g,)
    return (M.mul(g, M.exp(M.sub(ctx.inputs[0], ctx.outputs[0]))),)
