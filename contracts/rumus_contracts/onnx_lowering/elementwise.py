"""ONNX lowerings of the elementwise ops (unary math, arithmetic, comparisons, where, clamp, copy, fill)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import Lowering, LoweringContext, OnnxNode, one, onnx_dtype


def _rsqrt(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    root = ctx.fresh("sqrt")
    return [OnnxNode("Sqrt", [ins[0]], [root]), OnnxNode("Reciprocal", [root], list(outs))]


def _ne(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    eq = ctx.fresh("eq")
    return [OnnxNode("Equal", list(ins), [eq]), OnnxNode("Not", [eq], list(outs))]


def _clamp(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    dt = ctx.input_dtypes[0]
    lo = "" if a["min"] is None else ctx.const(a["min"], dt)
    hi = "" if a["max"] is None else ctx.const(a["max"], dt)
    return [OnnxNode("Clip", [ins[0], lo, hi], list(outs))]


def _copy(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    if ctx.output_dtypes[0] == ctx.input_dtypes[0]:
        return [OnnxNode("Identity", [ins[0]], list(outs))]
    return [OnnxNode("Cast", [ins[0]], list(outs), {"to": onnx_dtype(ctx.output_dtypes[0])})]


def _fill(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    dt = ctx.output_dtypes[0]
    value = np.asarray([a["value"]]).astype(dt.numpy if dt.name != "bfloat16" else np.float32)
    if dt.name == "bfloat16":  # ConstantOfShape's value is typed; make it float32 and cast
        tmp = ctx.fresh("fill")
        return [OnnxNode("ConstantOfShape", [ctx.shape_tensor(ctx.output_shapes[0])], [tmp], {"value": value}),
                OnnxNode("Cast", [tmp], list(outs), {"to": onnx_dtype(dt)})]
    return [OnnxNode("ConstantOfShape", [ctx.shape_tensor(ctx.output_shapes[0])], list(outs), {"value": value})]


LOWERINGS: dict[str, Lowering] = {
    "neg": one("Neg"), "abs": one("Abs"), "exp": one("Exp"), "log": one("Log"), "sqrt": one("Sqrt"),
    "rsqrt": _rsqrt, "sin": one("Sin"), "cos": one("Cos"), "tanh": one("Tanh"), "sigmoid": one("Sigmoid"),
    "relu": one("Relu"), "erf": one("Erf"),
    "add": one("Add"), "sub": one("Sub"), "mul": one("Mul"), "div": one("Div"), "pow": one("Pow"),
    "maximum": one("Max"), "minimum": one("Min"),
    "eq": one("Equal"), "ne": _ne, "lt": one("Less"), "le": one("LessOrEqual"), "gt": one("Greater"),
    "ge": one("GreaterOrEqual"), "where": one("Where"), "clamp": _clamp, "copy": _copy, "fill": _fill,
}
