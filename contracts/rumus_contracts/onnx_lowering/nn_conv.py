"""ONNX lowerings of convolution and pooling. Attributes reaching these ops are normalized int pairs with
symmetric padding, so ONNX's pads are (top, left, bottom, right) = padding twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxExportError, OnnxNode


def _pair(v: Any) -> list[int]:
    return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]


def _conv2d(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    p = _pair(a["padding"])
    return [OnnxNode("Conv", list(ins), list(outs), {  # conv2d_bias's third input is Conv's B
        "strides": _pair(a["stride"]), "pads": p + p, "dilations": _pair(a["dilation"]), "group": int(a["groups"]),
        "kernel_shape": list(ctx.input_shapes[1][2:])})]


def _conv_transpose(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str],
                    a: Mapping[str, Any]) -> list[OnnxNode]:
    # conv2d_backward_input(grad, weight) is conv_transpose2d (the core's conv_transpose2d composite calls
    # it); the weight layout [C_grad, C_out / groups, kh, kw] is ConvTranspose's. The output size fixes the
    # output_padding.
    s, p, d = _pair(a["stride"]), _pair(a["padding"]), _pair(a["dilation"])
    k, n_in, out = ctx.input_shapes[1][2:], ctx.input_shapes[0][2:], ctx.output_shapes[0][2:]
    extra = [out[i] - (s[i] * (n_in[i] - 1) + d[i] * (k[i] - 1) + 1 - 2 * p[i]) for i in range(2)]
    return [OnnxNode("ConvTranspose", [ins[0], ins[1]], list(outs), {
        "strides": s, "pads": p + p, "dilations": d, "group": int(a["groups"]), "output_padding": extra,
        "kernel_shape": list(k)})]


def _max_pool(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    p = _pair(a["padding"])
    return [OnnxNode("MaxPool", [ins[0]], list(outs), {
        "kernel_shape": _pair(a["kernel_size"]), "strides": _pair(a["stride"]), "pads": p + p,
        "dilations": _pair(a["dilation"]), "ceil_mode": int(bool(a["ceil_mode"]))})]


def _avg_pool(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    p, k, div = _pair(a["padding"]), _pair(a["kernel_size"]), a["divisor_override"]
    attrs = {"kernel_shape": k, "strides": _pair(a["stride"]), "pads": p + p, "ceil_mode": int(bool(a["ceil_mode"])),
             "count_include_pad": int(bool(a["count_include_pad"]) or div is not None)}
    if div is None:
        return [OnnxNode("AveragePool", [ins[0]], list(outs), attrs)]
    if a["ceil_mode"]:  # a window cut short by ceil_mode averages over fewer than kh * kw cells
        raise OnnxExportError("avg_pool2d: divisor_override with ceil_mode=True has no ONNX AveragePool equivalent; "
                              "use ceil_mode=False or pad the input first")
    # every window then holds kh * kw cells (padding counted): the window sum over the given divisor
    mean = ctx.fresh("window_mean")
    return [OnnxNode("AveragePool", [ins[0]], [mean], attrs),
            OnnxNode("Mul", [mean, ctx.const(k[0] * k[1] / float(div), ctx.input_dtypes[0])], list(outs))]


LOWERINGS: dict[str, Lowering] = {
    "conv2d": _conv2d, "conv2d_bias": _conv2d, "conv2d_backward_input": _conv_transpose, "max_pool2d": _max_pool,
    "avg_pool2d": _avg_pool,
}
