"""ONNX lowerings of activations and softmax."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxNode


def _gelu(approximate: str) -> Lowering:
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        if ctx.opset >= 20:
            return [OnnxNode("Gelu", [ins[0]], list(outs), {"approximate": approximate})]
        dt, x = ctx.input_dtypes[0], ins[0]
        if approximate == "none":  # 0.5 x (1 + erf(x / sqrt 2))
            half, t1, t2, t3 = ctx.fresh("half"), ctx.fresh("g"), ctx.fresh("g"), ctx.fresh("g")
            return [OnnxNode("Mul", [x, ctx.const(0.5, dt)], [half]),
                    OnnxNode("Mul", [x, ctx.const(1 / math.sqrt(2), dt)], [t1]), OnnxNode("Erf", [t1], [t2]),
                    OnnxNode("Add", [t2, ctx.const(1.0, dt)], [t3]), OnnxNode("Mul", [half, t3], list(outs))]
        # 0.5 (1 + tanh(z)) = sigmoid(2 z), z = sqrt(2/pi) (x + 0.044715 x^3); written with Sigmoid because
        # onnxruntime's fusion mis-rewrites the tanh form when the exact form reads the same input
        cube, inner, z, s, gate = (ctx.fresh(h) for h in ("cube", "inner", "z", "z2", "gate"))
        return [OnnxNode("Pow", [x, ctx.const(3.0, dt)], [cube]),
                OnnxNode("Mul", [cube, ctx.const(0.044715, dt)], [inner]),
                OnnxNode("Add", [x, inner], [z]),
                OnnxNode("Mul", [z, ctx.const(2 * math.sqrt(2 / math.pi), dt)], [s]),
                OnnxNode("Sigmoid", [s], [gate]),
                OnnxNode("Mul", [x, gate], list(outs))]
    return lower


def _silu(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    s = ctx.fresh("sigmoid")
    return [OnnxNode("Sigmoid", [ins[0]], [s]), OnnxNode("Mul", [ins[0], s], list(outs))]


def _elu(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("Elu", [ins[0]], list(outs), {"alpha": float(a["alpha"])})]


def _leaky(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("LeakyRelu", [ins[0]], list(outs), {"alpha": float(a["negative_slope"])})]


def _softplus(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    # PyTorch's: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
    dt, x = ctx.input_dtypes[0], ins[0]
    bx, sp, soft, big = ctx.fresh("bx"), ctx.fresh("sp"), ctx.fresh("soft"), ctx.fresh("big")
    return [OnnxNode("Mul", [x, ctx.const(float(a["beta"]), dt)], [bx]),
            OnnxNode("Softplus", [bx], [sp]),
            OnnxNode("Div", [sp, ctx.const(float(a["beta"]), dt)], [soft]),
            OnnxNode("Greater", [bx, ctx.const(float(a["threshold"]), dt)], [big]),
            OnnxNode("Where", [big, x, soft], list(outs))]


def _softmax(op_type: str) -> Lowering:
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        return [OnnxNode(op_type, [ins[0]], list(outs), {"axis": int(a["dim"])})]
    return lower


LOWERINGS: dict[str, Lowering] = {
    "gelu": _gelu("none"), "gelu_tanh": _gelu("tanh"), "silu": _silu, "elu": _elu, "leaky_relu": _leaky,
    "softplus": _softplus, "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
}
