"""CPU kernel of row-wise max pooling (csrc/vision_pool.c), forward only. The core's schema makes x contiguous
before a kernel runs, so only the offset matters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import TensorArg

from ._kernels import ffi, lib

_FORWARD = {"float32": lib.rv_max_pool2d_f32, "float64": lib.rv_max_pool2d_f64}


def _ptr(arg: TensorArg) -> Any:
    return ffi.from_buffer(arg.buffer) + arg.offset * arg.buffer.itemsize


def _geometry(x: Sequence[int], y: Sequence[int], attrs: Mapping[str, Any]) -> Any:
    """[planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw] as csrc/vision_pool.c reads it."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["dilation"]
    return ffi.new("int64_t[]", [x[0] * x[1], x[2], x[3], y[2], y[3], kh, kw, sh, sw, ph, pw, dh, dw])


def max_pool2d(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, x = outputs[0], inputs[0]
    if y.numel:
        _FORWARD[x.dtype.name](_ptr(x), _ptr(y), _geometry(x.shape, y.shape, attrs))

