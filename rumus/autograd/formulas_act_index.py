"""Backward formulas of the dropout, embedding and integer-indexing ops (rumus_contracts.ops.indexing,
.nn). The activations' formulas are generated from the expression table (formulas_table.py).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import _creation
from .. import _math as M
from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula
from .graph import Context

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


# index_select / gather read the input at indexed positions and index_add / scatter_add write there: each
# pair is the other's backward (one along a dim with a 1-D index, one elementwise with a full index).

def _scatter_into_zeros(ctx: Context, g: Tensor, scatter: str) -> tuple[Tensor, None]:
    """The gradient of a gather-like op: g added at the positions it read, into zeros of x's shape."""
    zeros = _creation.zeros(ctx.input_shapes[0], dtype=g.dtype, device=g.device)
    return _op(scatter)(zeros, ctx.inputs[1], g, dim=ctx.attrs["dim"]), None


def _gather_back(ctx: Context, g: Tensor, gather: str) -> tuple[Tensor | None, None, Tensor | None]:
    """The gradients of a scatter-add-like op out = x + alpha * (src at index): g for x, alpha * g read
    back at the positions src was added to for src."""
    need_x, _, need_src = ctx.needs_input_grad
    gs = None
    if need_src:
        gs = _op(gather)(g, ctx.inputs[1], dim=ctx.attrs["dim"])
        alpha = float(ctx.attrs.get("alpha", 1.0))
        gs = gs if alpha == 1.0 else M.mul(gs, alpha)
    return (g if need_x else None), None, gs


for _gather_op, _scatter_op in (("index_select", "index_add"), ("gather", "scatter_add")):
    formula(_gather_op, inputs=True)(partial(_scatter_into_zeros, scatter=_scatter_op))
    formula(_scatter_op, inputs=True)(partial(_gather_back, gather=_gather_op))


from . import formulas_table as _formulas_table  # noqa: E402, F401  (registers the activations' formulas)
