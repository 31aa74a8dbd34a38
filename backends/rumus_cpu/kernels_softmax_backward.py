"""Fused softmax / log_softmax backward (csrc/softmax_backward.c); grad and y arrive contiguous (the
schema says so), so a row along `dim` is [outer, n, inner] strided by `inner`. float16/bfloat16 run the
float32 loop on widened copies and round once (widen.py): the row sum must not round per element."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, TensorArg

from ._lib import ffi, lib
from .dtypes import FLOAT, HALF
from .widen import widened_to_float32

_SFX = {"float32": ("float *", "f32"), "float64": ("double *", "f64")}


def _p(arg: TensorArg) -> Any:
    return ffi.cast(_SFX[arg.dtype.name][0], ffi.from_buffer(arg.buffer)) + arg.offset


def _kernel(log_form: int) -> Kernel:
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        dx, (g, y) = outputs[0], inputs
        if not g.shape:  # a 0-d softmax is constant: its gradient is 0
            _p(dx)[0] = 0.0
            return
        dim = int(attrs["dim"])
        outer = inner = 1
        for d, size in enumerate(g.shape):
            if d < dim:
                outer *= size
            elif d > dim:
                inner *= size
        fn = getattr(lib, f"rumus_softmax_backward_{_SFX[g.dtype.name][1]}")
        fn(_p(g), _p(y), _p(dx), outer, g.shape[dim], inner, log_form)
    return kernel


KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    ("softmax_backward", _kernel(0), FLOAT),
    ("log_softmax_backward", _kernel(1), FLOAT),
    ("softmax_backward", widened_to_float32(_kernel(0)), HALF),
    ("log_softmax_backward", widened_to_float32(_kernel(1)), HALF),
]
