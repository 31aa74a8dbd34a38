"""Backward of the fused cross_entropy_fwd: one cross_entropy_bwd call that writes d(logits) from the
logits and the saved row logsumexp (no one-hot, no stored probabilities). While a graph of the backward
is being built (create_graph), the same expression runs as core ops so that it can be differentiated
again; there the logsumexp is recomputed from the logits so that its own dependence on them is recorded.

    dlogits = g ((1 - s) w_t (p - onehot_t) + (s / C) (W p - w)),   0 on ignored rows
"""

from __future__ import annotations

from rumus_contracts import AutogradError

from .. import _math as M
from .. import _views
from .._creation import arange
from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula
from .grad_mode import state as grad_state
from .graph import Context


def _composite(ctx: Context, g: Tensor) -> Tensor:
    x, target, weight = ctx.inputs
    s = float(ctx.attrs["label_smoothing"])
    c = x.shape[1]
    valid = M.ne(target, int(ctx.attrs["ignore_index"]))
    safe = M.where(valid, target, 0)
    onehot = M.eq(_views.unsqueeze(arange(c, device=x.device), 0), _views.unsqueeze(safe, 1)).to(x.dtype)
    p = M.exp(M.sub(x, M.logsumexp(x, 1, keepdim=True)))
    if weight.ndim:
        w_t = _views.unsqueeze(weight[safe], 1)
        d = M.add(M.mul(M.sub(p, onehot), w_t * (1.0 - s)), M.mul(M.sub(M.mul(p, M.sum(weight)), weight), s / c))
    else:
        d = M.sub(M.sub(p, M.mul(onehot, 1.0 - s)), s / c)
    return M.mul(d, _views.unsqueeze(M.mul(g, valid.to(g.dtype)), 1))


@formula("cross_entropy_fwd", inputs=True, outputs=True)
def _cross_entropy_fwd(ctx: Context, g_loss: Tensor | None, g_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    if g_lse is not None:
        raise AutogradError("cross_entropy_fwd: its logsumexp output is saved for the backward and has no gradient "
                            "formula; differentiate rumus.logsumexp instead")
    if g_loss is None or not ctx.needs_input_grad[0]:
        return None, None, None
    if grad_state.enabled:
        return _composite(ctx, g_loss), None, None
    x, target, weight = ctx.inputs
    dx: Tensor = _op("cross_entropy_bwd")(g_loss, x, target, weight, ctx.outputs[1], **ctx.attrs)
    return dx, None, None


@formula("cross_entropy_mean", inputs=True, outputs=True)
def _cross_entropy_mean(ctx: Context, g_loss: Tensor | None, g_lse: Tensor | None,
                        g_total: Tensor | None) -> tuple[Tensor | None, ...]:
    # g_total: the weight sum is constant in the logits (a double backward reaches it through the re-attached
    # output that divides g_rows): its derivative is 0
    if g_lse is not None:
        raise AutogradError("cross_entropy_mean: its logsumexp output is saved for the backward and has no "
                            "gradient formula; differentiate rumus.logsumexp instead")
    if g_loss is None or not ctx.needs_input_grad[0]:
        return None, None, None
    x, target, weight = ctx.inputs
    _, lse, total = ctx.outputs
    g_rows = M.div(_views.expand(g_loss, (x.shape[0],)), total)  # every row's share of the mean, one kernel
    if grad_state.enabled:
        return _composite(ctx, g_rows), None, None
    dx: Tensor = _op("cross_entropy_bwd")(g_rows, x, target, weight, lse, **ctx.attrs)
    return dx, None, None
