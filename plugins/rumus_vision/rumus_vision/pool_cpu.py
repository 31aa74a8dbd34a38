"""CPU kernels of row-wise pooling: max_pool2d forward (csrc/vision_pool_impl.inc), avg_pool2d forward and
backward (csrc/vision_avg_pool_impl.inc). The core's schemas make the inputs contiguous before a kernel runs,
so only the offset matters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import TensorArg

from ._kernels import ffi, lib

_FORWARD = {"float32": lib.rv_max_pool2d_f32, "float64": lib.rv_max_pool2d_f64}
_AVG = {"float32": lib.rv_avg_pool2d_f32, "float64": lib.rv_avg_pool2d_f64}
_AVG_BACKWARD = {"float32": lib.rv_avg_pool2d_backward_f32, "float64": lib.rv_avg_pool2d_backward_f64}


def _ptr(arg: TensorArg) -> Any:
    return ffi.from_buffer(arg.buffer) + arg.offset * arg.buffer.itemsize


def _geometry(x: Sequence[int], y: Sequence[int], attrs: Mapping[str, Any]) -> Any:
    """[planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw] as csrc/vision_pool.c reads it."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["dilation"]
    return ffi.new("int64_t[]", [x[0] * x[1], x[2], x[3], y[2], y[3], kh, kw, sh, sw, ph, pw, dh, dw])


Kernel = Callable[[Sequence[TensorArg], Sequence[TensorArg], Mapping[str, Any]], None]
Geometry = Callable[[Sequence[int], Sequence[int], Mapping[str, Any]], Any]


def _forward_kernel(by_dtype: Mapping[str, Any], geometry: Geometry) -> Kernel:
    """A forward pooling kernel: by_dtype[x's dtype](x, y, geometry(x's shape, y's shape, attrs)), skipped when
    y is empty."""
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        y, x = outputs[0], inputs[0]
        if y.numel:
            by_dtype[x.dtype.name](_ptr(x), _ptr(y), geometry(x.shape, y.shape, attrs))
    return kernel


max_pool2d = _forward_kernel(_FORWARD, _geometry)



def _avg_geometry(x: Sequence[int], y: Sequence[int], attrs: Mapping[str, Any]) -> Any:
    """_geometry's 13 ints (dilation 1) + [count_include_pad, divisor_override or 0]."""
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    div = attrs["divisor_override"]
    return ffi.new("int64_t[]", [x[0] * x[1], x[2], x[3], y[2], y[3], kh, kw, sh, sw, ph, pw, 1, 1,
                                 int(bool(attrs["count_include_pad"])), int(div) if div else 0])


avg_pool2d = _forward_kernel(_AVG, _avg_geometry)


def avg_pool2d_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gx, gy = outputs[0], inputs[0]
    if gx.numel:
        if _AVG_BACKWARD[gy.dtype.name](_ptr(gy), _ptr(gx), _avg_geometry(gx.shape, gy.shape, attrs)):
            raise MemoryError(f"avg_pool2d_backward: no memory for a scratch row of {gy.shape[3]} elements")
