"""ONNX lowerings of the normalizations: LayerNormalization and BatchNormalization (inference) are ONNX
ops; RMS norm and group norm are written out from primitives (their ONNX ops need opset 23 / 21)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import Lowering, LoweringContext, OnnxExportError, OnnxNode, axes


def _layer_norm(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    k = len(ctx.input_shapes[1])
    return [OnnxNode("LayerNormalization", list(ins), list(outs), {"axis": -k, "epsilon": float(a["eps"])})]


def _rms_norm(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    k, nd, dt = len(ctx.input_shapes[1]), len(ctx.input_shapes[0]), ctx.input_dtypes[0]
    sq, ms, eps, root, normed = (ctx.fresh(h) for h in ("sq", "ms", "eps", "root", "normed"))
    last = list(range(nd - k, nd))
    mean = OnnxNode("ReduceMean", [sq, axes(ctx, last)], [ms], {"keepdims": 1}) if ctx.opset >= 18 else \
        OnnxNode("ReduceMean", [sq], [ms], {"axes": last, "keepdims": 1})
    return [OnnxNode("Mul", [ins[0], ins[0]], [sq]),
            mean,
            OnnxNode("Add", [ms, ctx.const(float(a["eps"]), dt)], [eps]),
            OnnxNode("Sqrt", [eps], [root]),
            OnnxNode("Div", [ins[0], root], [normed]),
            OnnxNode("Mul", [normed, ins[1]], list(outs))]


def _group_norm(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    # [N, C, *] -> [N, G, rest]; normalize over the last dim; back to x's shape; per-channel affine
    x_shape, dt = ctx.input_shapes[0], ctx.input_dtypes[0]
    if 0 in x_shape:  # nothing to normalize (and a [0, G, -1] target would be ambiguous)
        return [OnnxNode("Identity", [ins[0]], list(outs))]
    g = int(a["num_groups"])
    grouped, mean, cen, sq, var, ve, root, normed, back, scaled, shape = (ctx.fresh(h) for h in (
        "grouped", "mean", "centered", "sq", "var", "var_eps", "root", "normed", "back", "scaled", "shape"))
    per_channel = ctx.const(np.asarray([-1] + [1] * (len(x_shape) - 2), dtype=np.int64), "int64")
    w, b = ctx.fresh("w"), ctx.fresh("b")
    last = [2]

    def reduce_mean(src: str, dst: str) -> OnnxNode:
        if ctx.opset >= 18:
            return OnnxNode("ReduceMean", [src, axes(ctx, last)], [dst], {"keepdims": 1})
        return OnnxNode("ReduceMean", [src], [dst], {"axes": last, "keepdims": 1})
    return [OnnxNode("Reshape", [ins[0], ctx.const(np.asarray([0, g, -1], dtype=np.int64), "int64")], [grouped]),
            reduce_mean(grouped, mean),
            OnnxNode("Sub", [grouped, mean], [cen]),
            OnnxNode("Mul", [cen, cen], [sq]),
            reduce_mean(sq, var),
            OnnxNode("Add", [var, ctx.const(float(a["eps"]), dt)], [ve]),
            OnnxNode("Sqrt", [ve], [root]),
            OnnxNode("Div", [cen, root], [normed]),
            OnnxNode("Shape", [ins[0]], [shape]),
            OnnxNode("Reshape", [normed, shape], [back]),
            OnnxNode("Reshape", [ins[1], per_channel], [w]),
            OnnxNode("Reshape", [ins[2], per_channel], [b]),
            OnnxNode("Mul", [back, w], [scaled]),
            OnnxNode("Add", [scaled, b], list(outs))]


def _batch_norm(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    if a["training"]:
        raise OnnxExportError("batch_norm ran in training mode while tracing; call model.eval() before exporting "
                              "(the graph then uses the running statistics)")
    return [OnnxNode("BatchNormalization", list(ins), list(outs), {"epsilon": float(a["eps"])})]


LOWERINGS: dict[str, Lowering] = {
    "layer_norm": _layer_norm, "rms_norm": _rms_norm, "group_norm": _group_norm, "batch_norm": _batch_norm,
}
