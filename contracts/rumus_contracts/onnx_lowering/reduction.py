"""ONNX lowerings of reductions. Kernels write the keepdim shape, so every Reduce* keeps dims; the core's
squeeze that follows is traced as a view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxNode, axes, onnx_dtype


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


def _reduce_node(ctx: LoweringContext, op_type: str, src: str, dst: str, dims: list[int]) -> OnnxNode:
    if ctx.opset >= 18 or op_type == "ReduceSum":
        return OnnxNode(op_type, [src, axes(ctx, dims)], [dst], {"keepdims": 1})
    return OnnxNode(op_type, [src], [dst], {"axes": dims, "keepdims": 1})


def _var(take_root: bool) -> Lowering:
    """sum((x - mean)^2) / max(n - correction, 0), with n read from x's shape at run time (dynamic axes)."""
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        dims, dt, x = [int(d) for d in a["dims"]], ctx.input_dtypes[0], ins[0]
        names = [ctx.fresh(h) for h in ("mean", "centred", "sq", "ssum", "shape", "sizes", "n", "nf", "dof", "dofc",
                                        "var")]
        mean, centred, sq, ssum, shape, sizes, n, nf, dof, dofc, var = names
        nodes = [_reduce_node(ctx, "ReduceMean", x, mean, dims), OnnxNode("Sub", [x, mean], [centred]),
                 OnnxNode("Mul", [centred, centred], [sq]), _reduce_node(ctx, "ReduceSum", sq, ssum, dims),
                 OnnxNode("Shape", [x], [shape]),
                 OnnxNode("Gather", [shape, axes(ctx, dims)], [sizes], {"axis": 0}),
                 _reduce_node(ctx, "ReduceProd", sizes, n, [0]),
                 OnnxNode("Cast", [n], [nf], {"to": onnx_dtype(dt)}),
                 OnnxNode("Sub", [nf, ctx.const(float(a["correction"]), dt)], [dof]),
                 OnnxNode("Max", [dof, ctx.const(0.0, dt)], [dofc])]
        if not take_root:
            return nodes + [OnnxNode("Div", [ssum, dofc], list(outs))]
        return nodes + [OnnxNode("Div", [ssum, dofc], [var]), OnnxNode("Sqrt", [var], list(outs))]
    return lower


LOWERINGS: dict[str, Lowering] = {
    "mean": _reduce("ReduceMean", 18), "var": _var(False), "std": _var(True),
    "sum": _reduce("ReduceSum", 13), "prod": _reduce("ReduceProd", 18), "amax": _reduce("ReduceMax", 18),
    "amin": _reduce("ReduceMin", 18), "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"),
}
