"""Backward formulas of the activation, dropout, embedding and integer-indexing ops
(rumus_contracts.ops.activation, .indexing, .nn).

An activation's formula calls its fused `<op>_backward` kernel when the tensor's backend has one and
falls back to core ops otherwise, so a backend that ships only the forward kernel still trains; under
create_graph it always uses core ops, so higher derivatives are exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import _creation, _runtime
from .. import _math as M
from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula
from .grad_mode import state as grad_state
from .graph import Context

_fused_cache: dict[tuple[str, str, str], bool] = {}


def has_kernel(op: str, like: Tensor) -> bool:
    """Whether `like`'s backend has a kernel for `op` at `like`'s dtype (cached)."""
    backend = like._storage.backend
    key = (op, backend.name, like.dtype.name)
    hit = _fused_cache.get(key)
    if hit is None:
        hit = _fused_cache[key] = _runtime.plugins().kernels.find(op, backend.name, like.dtype) is not None
    return hit


# ---- activations ------------------------------------------------------------------------------------

@formula("erf", inputs=True)
def _erf(ctx: Context, g: Tensor) -> tuple[Tensor]:
    x = ctx.inputs[0]
    return (M.mul(g, M.mul(M.exp(M.neg(M.mul(x, x))), 2.0 / math.sqrt(math.pi))),)


def _gelu_fallback(g: Tensor, x: Tensor) -> Tensor:
    cdf = M.mul(M.add(_op("erf")(M.mul(x, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
    pdf = M.mul(M.exp(M.mul(M.mul(x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
    return M.mul(g, M.add(cdf, M.mul(x, pdf)))


def _gelu_tanh_fallback(g: Tensor, x: Tensor) -> Tensor:
    k, kappa = math.sqrt(2.0 / math.pi), 0.044715
    x2 = M.mul(x, x)
    t = M.tanh(M.mul(M.add(x, M.mul(M.mul(x2, x), kappa)), k))
    left = M.mul(M.add(t, 1.0), 0.5)
    right = M.mul(M.mul(M.mul(x, 0.5), M.sub(1.0, M.mul(t, t))), M.mul(M.add(M.mul(x2, 3 * kappa), 1.0), k))
    return M.mul(g, M.add(left, right))


def _silu_fallback(g: Tensor, x: Tensor) -> Tensor:
    s = M.sigmoid(x)
    return M.mul(g, M.mul(s, M.add(M.mul(x, M.sub(1.0, s)), 1.0)))


def _leaky_relu_fallback(g: Tensor, x: Tensor, negative_slope: float) -> Tensor:
    return M.where(M.gt(x, 0), g, M.mul(g, negative_slope))


def _softplus_fallback(g: Tensor, x: Tensor, beta: float, threshold: float) -> Tensor:
    bx = M.mul(x, beta)
    return M.where(M.gt(bx, threshold), g, M.mul(g, M.sigmoid(bx)))


def _elu_fallback(g: Tensor, x: Tensor, alpha: float) -> Tensor:
    return M.where(M.gt(x, 0), g, M.mul(g, M.mul(M.exp(M.minimum(x, 0.0)), alpha)))


FALLBACKS: dict[str, tuple[Callable[..., Tensor], tuple[str, ...]]] = {
    "gelu": (_gelu_fallback, ()),
    "gelu_tanh": (_gelu_tanh_fallback, ()),
    "silu": (_silu_fallback, ()),
    "leaky_relu": (_leaky_relu_fallback, ("negative_slope",)),
    "softplus": (_softplus_fallback, ("beta", "threshold")),
    "elu": (_elu_fallback, ("alpha",)),
}


def _register_activation(name: str) -> None:
    fallback, attr_names = FALLBACKS[name]
    backward = f"{name}_backward"

    def forward_formula(ctx: Context, g: Tensor) -> tuple[Tensor]:
        x = ctx.inputs[0]
        attrs = {n: ctx.attrs[n] for n in attr_names}
        # the fused op is differentiable in grad only: under create_graph (grad mode on while
        # differentiating) the core-op form keeps second derivatives exact
        if not grad_state.enabled and has_kernel(backward, x):
            return (_op(backward)(g, x, **attrs),)
        return (fallback(g, x, *attrs.values()),)

    def backward_formula(ctx: Context, gg: Tensor) -> tuple[Tensor, None]:
        # grad * f'(x) is linear in grad: its gradient is the same op applied to the incoming one
        return _op(backward)(gg, ctx.inputs[1], **{n: ctx.attrs[n] for n in attr_names}), None

    formula(name, inputs=True)(forward_formula)
    formula(backward, inputs=True)(backward_formula)


for _name in FALLBACKS:
    _register_activation(_name)


# ---- dropout ---------------------------------------------------------------------------------------

@formula("dropout")
def _dropout(ctx: Context, g: Tensor) -> tuple[Tensor]:
    # linear in x with a mask that is a pure function of (seed, offset, index): recompute, store nothing
    return (_op("dropout")(g, **ctx.attrs),)


# ---- embedding and indexed ops -----------------------------------------------------------------------

@formula("embedding", inputs=True)
def _embedding(ctx: Context, g: Tensor) -> tuple[Tensor, None]:
    return _op("embedding_backward")(g, ctx.inputs[1], num_weights=ctx.input_shapes[0][0],
                                     padding_idx=ctx.attrs["padding_idx"]), None


@formula("embedding_backward", inputs=True)
def _embedding_backward(ctx: Context, gg: Tensor) -> tuple[Tensor, None]:
    pad = ctx.attrs["padding_idx"]
    if pad is not None:  # the padding row received nothing, so nothing flows back through it
        keep = np.ones((gg.shape[0], 1))
        keep[pad] = 0.0
        gg = M.mul(gg, _creation.from_host(keep, gg.dtype, gg.device))
    return _op("embedding")(gg, ctx.inputs[1]), None


@formula("index_select", inputs=True)
def _index_select(ctx: Context, g: Tensor) -> tuple[Tensor, None]:
    zeros = _creation.zeros(ctx.input_shapes[0], dtype=g.dtype, device=g.device)
    return _op("index_add")(zeros, ctx.inputs[1], g, dim=ctx.attrs["dim"]), None


@formula("index_add", inputs=True)
def _index_add(ctx: Context, g: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
    need_x, _, need_src = ctx.needs_input_grad
    gs = None
    if need_src:
        gs = _op("index_select")(g, ctx.inputs[1], dim=ctx.attrs["dim"])
        alpha = float(ctx.attrs["alpha"])
        gs = gs if alpha == 1.0 else M.mul(gs, alpha)
    return (g if need_x else None), None, gs


@formula("gather", inputs=True)
def _gather(ctx: Context, g: Tensor) -> tuple[Tensor, None]:
    zeros = _creation.zeros(ctx.input_shapes[0], dtype=g.dtype, device=g.device)
    return _op("scatter_add")(zeros, ctx.inputs[1], g, dim=ctx.attrs["dim"]), None


@formula("scatter_add", inputs=True)
def _scatter_add(ctx: Context, g: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
    need_x, _, need_src = ctx.needs_input_grad
    gs = _op("gather")(g, ctx.inputs[1], dim=ctx.attrs["dim"]) if need_src else None
    return (g if need_x else None), None, gs
