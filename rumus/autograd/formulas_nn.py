"""Backward formulas of the convolution, pooling, normalization and linear ops (rumus_contracts.ops.nn_conv,
nn_pool, nn_norm, nn_linear), written with those ops so every backend gets gradients from its forward kernels.

conv2d, conv2d_backward_input and conv2d_backward_weight are each other's derivatives (second
derivatives work); avg_pool2d and avg_pool2d_backward likewise. max_pool2d's backward and the
normalization backward ops are not differentiable themselves.
"""

from __future__ import annotations

from typing import Any

from .. import _math as M
from .. import _views
from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula, relu_grad, tanh_grad
from .grad_mode import state as grad_state
from .kernel_lookup import has_kernel
from .graph import Context

_CONV_KEYS = ("stride", "padding", "dilation", "groups")
_POOL_KEYS = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")


def _pick(attrs: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: attrs[k] for k in keys}


@formula("conv2d", inputs=True)
def _conv2d(ctx: Context, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    need_x, need_w = ctx.needs_input_grad
    a = _pick(ctx.attrs, _CONV_KEYS)
    x_shape, w_shape = ctx.input_shapes
    gx = _op("conv2d_backward_input")(g, ctx.inputs[1], input_size=x_shape[2:], **a) if need_x else None
    gw = _op("conv2d_backward_weight")(g, ctx.inputs[0], kernel_size=w_shape[2:], **a) if need_w else None
    return gx, gw


@formula("conv2d_bias", inputs=True)
def _conv2d_bias(ctx: Context, g: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    need_x, need_w, need_b = ctx.needs_input_grad
    a = _pick(ctx.attrs, _CONV_KEYS)
    x_shape, w_shape, _ = ctx.input_shapes
    gx = _op("conv2d_backward_input")(g, ctx.inputs[1], input_size=x_shape[2:], **a) if need_x else None
    gw = _op("conv2d_backward_weight")(g, ctx.inputs[0], kernel_size=w_shape[2:], **a) if need_w else None
    gb = M.sum(g, (0, 2, 3)) if need_b else None
    return gx, gw, gb


@formula("linear", inputs=True)
def _linear(ctx: Context, g: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    # out = x @ w.T + b, on the rows of x as a [rows, in] matrix. The weight's gradient is one [out, in] GEMM
    # over every row (contiguous, as the parameter is stored: optimizers never copy it); x's uses the weight as
    # stored. Built from differentiable ops and views, so create_graph works.
    need_x, need_w, need_b = ctx.needs_input_grad
    x, w, _ = ctx.inputs
    g2 = g if g.ndim == 2 else g.reshape(-1, w.shape[0])  # the usual [batch, out] needs no reshape
    # the three in one call where the backend has the kernel (its composite would only add a checked dispatch)
    if need_x and need_w and need_b and not grad_state.enabled and has_kernel("linear_backward", g2):
        x2 = x if x.ndim == 2 else x.reshape(-1, w.shape[1])
        fx, fw, fb = _op("linear_backward").multi(g2, x2, w)
        return (fx if x.ndim == 2 else fx.reshape(x.shape)), fw, fb
    gx, gw, gb = _linear_grads(g2, x if x.ndim == 2 else x.reshape(-1, w.shape[1]), w, need_x, need_w, need_b)
    return (gx if gx is None or x.ndim == 2 else gx.reshape(x.shape)), gw, gb


def _linear_grads(g2: Tensor, x2: Tensor, w: Tensor, need_x: bool, need_w: bool, need_b: bool
                  ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """x's, the weight's and the bias's gradients of x2 [rows, in] @ w.T + b from g2 [rows, out], the ones
    asked for, as differentiable ops."""
    gx = _op("matmul")(g2, w) if need_x else None
    gw = _op("matmul")(g2.mT, x2) if need_w else None
    gb = _views.drop_dims(_op("sum")(g2, dims=(0,)), (0,)) if need_b else None
    return gx, gw, gb


@formula("rnn_cell", inputs=True, outputs=True)
def _rnn_cell(ctx: Context, g: Tensor) -> tuple[Tensor | None, ...]:
    # the four in one op where no graph is being built (the backend's kernel or the op's composite); under
    # create_graph the same steps as differentiable ops
    need = ctx.needs_input_grad
    _, h, w, _ = ctx.inputs
    out = ctx.outputs[0]
    act = ctx.attrs["nonlinearity"]
    if not grad_state.enabled:
        grads = _op("rnn_cell_backward").multi(g, h, w, out, nonlinearity=act)
        return tuple(t if n else None for t, n in zip(grads, need))
    d = tanh_grad(g, out) if act == "tanh" else relu_grad(g, out)
    return ((d if need[0] else None), *_linear_grads(d, h, w, need[1], need[2], need[3]))


@formula("conv2d_backward_input", inputs=True)
def _conv2d_backward_input(ctx: Context, c: Tensor) -> tuple[Tensor | None, Tensor | None]:
    # out = B(grad, w) is bilinear with <c, B(grad, w)> = <conv2d(c, w), grad>
    need_g, need_w = ctx.needs_input_grad
    a = _pick(ctx.attrs, _CONV_KEYS)
    gg = _op("conv2d")(c, ctx.inputs[1], **a) if need_g else None
    gw = _op("conv2d_backward_weight")(ctx.inputs[0], c, kernel_size=ctx.input_shapes[1][2:], **a) if need_w else None
    return gg, gw


@formula("conv2d_backward_weight", inputs=True)
def _conv2d_backward_weight(ctx: Context, c: Tensor) -> tuple[Tensor | None, Tensor | None]:
    # out = BW(grad, x) with <c, BW(grad, x)> = <conv2d(x, c), grad>
    need_g, need_x = ctx.needs_input_grad
    a = _pick(ctx.attrs, _CONV_KEYS)
    gg = _op("conv2d")(ctx.inputs[1], c, **a) if need_g else None
    gx = _op("conv2d_backward_input")(ctx.inputs[0], c, input_size=ctx.input_shapes[1][2:], **a) if need_x else None
    return gg, gx


@formula("max_pool2d", inputs=True)
def _max_pool2d(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (_op("max_pool2d_backward")(g, ctx.inputs[0], **ctx.attrs),)


@formula("avg_pool2d")
def _avg_pool2d(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (_op("avg_pool2d_backward")(g, input_size=ctx.input_shapes[0][2:], **ctx.attrs),)


@formula("avg_pool2d_backward")
def _avg_pool2d_backward(ctx: Context, c: Tensor) -> tuple[Tensor]:
    return (_op("avg_pool2d")(c, **_pick(ctx.attrs, _POOL_KEYS)),)


@formula("layer_norm", inputs=True)
def _layer_norm(ctx: Context, g: Tensor) -> tuple[Tensor | None, ...]:
    grads = _op("layer_norm_backward").multi(g, ctx.inputs[0], ctx.inputs[1], eps=ctx.attrs["eps"])
    return tuple(t if need else None for t, need in zip(grads, ctx.needs_input_grad))


@formula("rms_norm", inputs=True)
def _rms_norm(ctx: Context, g: Tensor) -> tuple[Tensor | None, ...]:
    grads = _op("rms_norm_backward").multi(g, ctx.inputs[0], ctx.inputs[1], eps=ctx.attrs["eps"])
    return tuple(t if need else None for t, need in zip(grads, ctx.needs_input_grad))


@formula("group_norm", inputs=True)
def _group_norm(ctx: Context, g: Tensor) -> tuple[Tensor | None, ...]:
    grads = _op("group_norm_backward").multi(g, ctx.inputs[0], ctx.inputs[1], **ctx.attrs)
    return tuple(t if need else None for t, need in zip(grads, ctx.needs_input_grad))


@formula("batch_norm", inputs=True)
def _batch_norm(ctx: Context, g: Tensor) -> tuple[Tensor | None, ...]:
    x, w, _, mean, var = ctx.inputs
    grads = _op("batch_norm_backward").multi(g, x, w, mean, var, **ctx.attrs)
    return (*(t if need else None for t, need in zip(grads, ctx.needs_input_grad)), None, None)
