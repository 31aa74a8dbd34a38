"""Backward of flash_attention: one fused flash_attention_backward call (FlashAttention-2: the probabilities
are recomputed tile by tile from the saved logsumexp, never stored)."""

from __future__ import annotations

from rumus_contracts import AutogradError

from ..ops import get as _op
from ..tensor import Tensor
from .formulas import formula
from .graph import Context


@formula("flash_attention", inputs=True, outputs=True)
def _flash_attention(ctx: Context, g_out: Tensor | None, g_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    if g_lse is not None:
        raise AutogradError("flash_attention: its logsumexp output is saved for the backward and has no gradient "
                            "formula; differentiate a logsumexp computed with rumus ops instead")
    q, k, v, bias, key_bias = ctx.inputs
    out, lse = ctx.outputs
    need = ctx.needs_input_grad
    if g_out is None:
        return None, None, None, None, None
    dq, dk, dv = _op("flash_attention_backward").multi(q, k, v, out, g_out, lse, bias, key_bias, **ctx.attrs)
    return (dq if need[0] else None), (dk if need[1] else None), (dv if need[2] else None), None, None
