"""ONNX lowerings of reductions. Kernels write the keepdim shape, so every Reduce* keeps dims; the core's
squeeze that follows is traced as a view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxNode, axes


def _reduce(op_type: str, axes_input_since: int) -> Lowering:
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        dims = [int(d) for d in a["dims"]]
        if not dims:  # reduces nothing (a 0-d tensor)
            return [OnnxNode("Identity", [ins[0]], list(outs))]
        if ctx.opset >= axes_input_since:
            return [OnnxNode(op_type, [ins[0], axes(ctx, dims)], list(outs), {"keepdims": 1})]
        return [OnnxNode(op_type, [ins[0]], list(outs), {"axes": dims, "keepdims": 1})]
    return lower


def _arg(op_type: str) -> Lowering:
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        if not ctx.input_shapes[0]:
            raise_0d = ctx.const(0, "int64")
            return [OnnxNode("Identity", [raise_0d], list(outs))]
        keep = int(len(ctx.output_shapes[0]) == len(ctx.input_shapes[0]))
        return [OnnxNode(op_type, [ins[0]], list(outs), {"axis": int(a["dim"]), "keepdims": keep})]
    return lower


LOWERINGS: dict[str, Lowering] = {
    "sum": _reduce("ReduceSum", 13), "prod": _reduce("ReduceProd", 18), "amax": _reduce("ReduceMax", 18),
    "amin": _reduce("ReduceMin", 18), "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"),
}
