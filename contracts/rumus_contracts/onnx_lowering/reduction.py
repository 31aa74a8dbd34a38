"""ONNX lowerings of reductions. Kernels write the keepdim shape, so every Reduce* keeps dims; the core's
squeeze that follows is traced as a view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxNode, axes, onnx_dtype


# A sum or product whose output dtype differs from its input's (integers and bool sum as int64, as torch's do;
# ReduceSum / ReduceProd take no 8- or 16-bit integers nor bool anyway) casts its input to the output dtype first.


def _reduce(op_type: str, axes_input_since: int) -> Lowering:
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        dims = [int(d) for d in a["dims"]]
        if not dims:  # reduces nothing (a 0-d tensor)
            return [OnnxNode("Identity", [ins[0]], list(outs))]
        nodes, src, dst = [], ins[0], outs[0]
        if op_type in ("ReduceSum", "ReduceProd") and ctx.input_dtypes[0] != ctx.output_dtypes[0]:
            src = ctx.fresh("wide")
            nodes.append(OnnxNode("Cast", [ins[0]], [src], {"to": onnx_dtype(ctx.output_dtypes[0])}))
        if ctx.opset >= axes_input_since:
            nodes.append(OnnxNode(op_type, [src, axes(ctx, dims)], [dst], {"keepdims": 1}))
        else:
            nodes.append(OnnxNode(op_type, [src], [dst], {"axes": dims, "keepdims": 1}))
        return nodes
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


def _logsumexp(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    """m + log(sum(exp(x - m))) with m the max, 0 where the max is infinite (PyTorch's rule, as the composite);
    ONNX's ReduceLogSumExp gives NaN on rows holding an infinity."""
    dims = [int(d) for d in a["dims"]]
    if not dims:
        return [OnnxNode("Identity", [ins[0]], list(outs))]
    m, inf, shift, diff, e, s, lg = (ctx.fresh(n) for n in ("max", "inf", "shift", "diff", "exp", "sum", "log"))
    zero = ctx.const(0.0, ctx.input_dtypes[0])
    return [_reduce_node(ctx, "ReduceMax", ins[0], m, dims), OnnxNode("IsInf", [m], [inf]),
            OnnxNode("Where", [inf, zero, m], [shift]), OnnxNode("Sub", [ins[0], shift], [diff]),
            OnnxNode("Exp", [diff], [e]), _reduce_node(ctx, "ReduceSum", e, s, dims), OnnxNode("Log", [s], [lg]),
            OnnxNode("Add", [lg, shift], list(outs))]


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


def _cumsum(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    """CumSum along dim, in the output's dtype (integers and bool sum as int64); half types sum in float32."""
    if not ctx.input_shapes[0]:
        return [OnnxNode("Cast", [ins[0]], list(outs), {"to": onnx_dtype(ctx.output_dtypes[0])})]
    out_dt = ctx.output_dtypes[0].name
    work = "float32" if out_dt in ("float16", "bfloat16") else out_dt
    nodes, src = [], ins[0]
    if ctx.input_dtypes[0].name != work:
        src = ctx.fresh("scan_in")
        nodes.append(OnnxNode("Cast", [ins[0]], [src], {"to": onnx_dtype(work)}))
    dst = outs[0] if work == out_dt else ctx.fresh("scan_out")
    nodes.append(OnnxNode("CumSum", [src, ctx.const(int(a["dim"]), "int64")], [dst]))
    if dst != outs[0]:
        nodes.append(OnnxNode("Cast", [dst], list(outs), {"to": onnx_dtype(out_dt)}))
    return nodes


LOWERINGS: dict[str, Lowering] = {
    "cumsum": _cumsum,
    "mean": _reduce("ReduceMean", 18), "var": _var(False), "std": _var(True),
    "sum": _reduce("ReduceSum", 13), "prod": _reduce("ReduceProd", 18), "amax": _reduce("ReduceMax", 18),
    "amin": _reduce("ReduceMin", 18), "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"),
    "logsumexp": _logsumexp,
}
