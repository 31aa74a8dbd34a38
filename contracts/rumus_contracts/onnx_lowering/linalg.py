"""ONNX lowerings of matmul (NumPy semantics on both sides), linear (x @ weight.T + bias) and an Elman RNN
step (act(xw + h @ w_hh.T + b_hh))."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxNode, one


def _linear(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    x, w, b = ins
    if len(ctx.input_shapes[0]) == 2:  # Gemm takes the weight as stored ([out, in]: transB) and the bias as C
        return [OnnxNode("Gemm", [x, w, b], list(outs), {"transB": 1})]
    # Gemm wants a 2-D A: other ranks (an unbatched 1-D x, extra batch dims) are MatMul with W^T, then Add
    wt, prod = ctx.fresh("weight_t"), ctx.fresh("linear_mm")
    return [OnnxNode("Transpose", [w], [wt], {"perm": [1, 0]}), OnnxNode("MatMul", [x, wt], [prod]),
            OnnxNode("Add", [prod, b], list(outs))]


def _rnn_cell(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    xw, h, w, b = ins  # h is [rows, hidden] (the schema's rule): one Gemm, as linear's 2-D case
    hw, pre = ctx.fresh("rnn_hw"), ctx.fresh("rnn_pre")
    return [OnnxNode("Gemm", [h, w, b], [hw], {"transB": 1}), OnnxNode("Add", [xw, hw], [pre]),
            OnnxNode("Tanh" if a["nonlinearity"] == "tanh" else "Relu", [pre], list(outs))]


LOWERINGS: dict[str, Lowering] = {"matmul": one("MatMul"), "linear": _linear, "rnn_cell": _rnn_cell}
