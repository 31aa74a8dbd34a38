"""2-D max / avg pooling and their backward ops (PyTorch's window, padding, ceil_mode and divisor
rules, with the CPU kernel's semantics: max_pool2d's gradient goes to each window's first maximum,
a later element winning only if greater or NaN).

Forward kernels run one invocation per output element. Backward kernels run one per input element
and gather from the windows covering it in row-major window order (the CPU kernel's accumulation
order), so there are no atomics. max_pool2d_backward with windows that do not overlap (the usual 2x2
stride 2) finds the one covering window's argmax again in the same pass; otherwise it first writes
each window's argmax to a scratch buffer, then gathers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import DType, TensorArg

from .conv_config import window_words
from .layout import new_buffer, readable_inputs
from .nn_common import dispatch

NINF = 0xFF800000
# the launch (each section is a `run`), the window inversion and the uniform (shared with the conv kernels)
INCLUDE = ("grid", "exact_div", "conv_config")
Geometry = tuple[list[int], dict[str, int]]


def _geometry(x_shape: Sequence[int], y_shape: Sequence[int], attrs: Mapping[str, Any]) -> Geometry:
    """conv_config.wgsl's window geometry of the pooling (c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo) and
    its pooling fields."""
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    dh, dw = attrs.get("dilation", (1, 1))
    div = attrs.get("divisor_override")
    geo = [x_shape[1], x_shape[2], x_shape[3], kh, kw, sh, sw, ph, pw, dh, dw, y_shape[2], y_shape[3]]
    return geo, {"include_pad": int(bool(attrs.get("count_include_pad", True))), "divisor": int(div) if div else 0,
                 "ninf": NINF}


def _run(dev: Any, sections: str, dtype: DType, buffers: list[Any], geometry: Geometry, out_offset: int,
         in_offset: int, count: int, second_offset: int = 0) -> None:
    geo, fields = geometry
    dispatch(dev, "nn_pool", sections, dtype, buffers,
             window_words(geo, out_off=out_offset, a_off=in_offset, b_off=second_offset, **fields), count,
             include=INCLUDE)


Kernel = Callable[[Sequence[TensorArg], Sequence[TensorArg], Mapping[str, Any]], None]


def _one_pass(sections: str, backward: bool = False) -> Kernel:
    """The kernel of a pooling op that is one pass of `sections` from one input: each output element from
    its window (forward), or each input element's gradient from the windows covering it (backward)."""
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        out = outputs[0]
        if out.numel == 0:
            return
        dev, (src,) = readable_inputs(outputs, inputs)
        image, pooled = (out, src) if backward else (src, out)
        _run(dev, sections, src.dtype, [out.buffer, src.buffer], _geometry(image.shape, pooled.shape, attrs),
             out.offset, src.offset, out.numel)
    return kernel


max_pool2d = _one_pass("window_max+max")
avg_pool2d = _one_pass("avg")
avg_pool2d_backward = _one_pass("avg_backward", backward=True)


def max_pool2d_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gx = outputs[0]
    if gx.numel == 0:
        return
    dev, (g, x) = readable_inputs(outputs, inputs)
    geo = _geometry(x.shape, g.shape, attrs)
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel_size"], attrs["stride"], attrs.get("dilation", (1, 1))
    if sh > dh * (kh - 1) and sw > dw * (kw - 1):  # no two windows share an element: one pass
        _run(dev, "window_max+max_backward_direct+max_gather", x.dtype, [gx.buffer, g.buffer, x.buffer], geo,
             gx.offset, g.offset, gx.numel, x.offset)
        return
    idx = new_buffer(dev, g.numel * 4, "max_pool2d argmax scratch")
    _run(dev, "window_max+max_index", x.dtype, [idx, x.buffer], geo, 0, x.offset, g.numel)
    _run(dev, "max_backward+max_gather", x.dtype, [gx.buffer, g.buffer, idx], geo, gx.offset, g.offset, gx.numel)


def kernels() -> dict[str, Any]:
    return {"max_pool2d": max_pool2d, "max_pool2d_backward": max_pool2d_backward, "avg_pool2d": avg_pool2d,
            "avg_pool2d_backward": avg_pool2d_backward}
