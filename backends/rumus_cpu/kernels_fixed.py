"""Fixed-point i16 kernels (SPEC E): thin calls into csrc/fixed_i16.c, integer arithmetic only.

fixed_linear honours any strides of x, weight, bias and the output in C (a transposed weight view
costs no copy). relu and requantize are flat loops in C: a strided input is first gathered into a
contiguous host array with numpy (a pure copy of int16/int64 values; no arithmetic happens there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, KernelRegistry, TensorArg, int64
from rumus_contracts.kit import strided_view as _view  # numpy view of a TensorArg (size-0 dims included)
from rumus_contracts.ops.fixed import FIXED_DTYPES

from ._lib import ffi, lib

BACKEND = "cpu"


def _ptr(arg: TensorArg, ctype: str) -> Any:
    """A typed C pointer to arg's first element (offset applied; strides stay the caller's job)."""
    return ffi.from_buffer(f"{ctype}[]", arg.buffer) + arg.offset


def _flat_input(arg: TensorArg) -> np.ndarray:
    """arg's elements in row-major order as a contiguous 1-D array (no copy when already contiguous)."""
    if arg.is_contiguous():
        flat: np.ndarray = arg.buffer[arg.offset:arg.offset + arg.numel]
        return flat
    return np.ascontiguousarray(_view(arg)).reshape(-1)


def _run_flat(o: TensorArg, x: TensorArg, x_ctype: str, call: Any) -> None:
    """call(out_ptr, in_ptr, count) on contiguous runs; a strided output is written through a temp."""
    n = o.numel
    if n == 0:
        return
    src = _flat_input(x)
    direct = o.is_contiguous()
    dst = o.buffer[o.offset:o.offset + n] if direct else np.empty(n, np.int16)
    call(ffi.from_buffer("int16_t[]", dst), ffi.from_buffer(f"{x_ctype}[]", src), n)
    if not direct:
        _view(o)[...] = dst.reshape(o.shape)


def fixed_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """out[M,N] = requantize(x[M,K] @ w[K,N] (+ b[N] << s), s), in int64 (fixed_linear[_nobias])."""
    o, x, w = outputs[0], inputs[0], inputs[1]
    m, n = o.shape
    if m == 0 or n == 0:
        return
    k = x.shape[1]
    if len(inputs) > 2:
        b = inputs[2]
        b_ptr, b_stride = _ptr(b, "int16_t"), b.strides[0]
    else:
        b_ptr, b_stride = ffi.NULL, 0
    s = o.dtype.param
    assert s is not None  # fixed dtypes always carry their scale
    lib.rumus_fixed_linear(_ptr(o, "int16_t"), o.strides[0], o.strides[1], _ptr(x, "int16_t"), x.strides[0],
                           x.strides[1], _ptr(w, "int16_t"), w.strides[0], w.strides[1], b_ptr, b_stride,
                           m, k, n, s)


def fixed_relu(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _run_flat(outputs[0], inputs[0], "int16_t", lib.rumus_fixed_relu)


def fixed_requantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                     attrs: Mapping[str, Any]) -> None:
    s = int(attrs["scale_log2"])
    _run_flat(outputs[0], inputs[0], "int64_t",
              lambda out, acc, count: lib.rumus_fixed_requantize(out, acc, count, s))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("fixed_linear", fixed_linear, FIXED_DTYPES),
    ("fixed_linear_nobias", fixed_linear, FIXED_DTYPES),
    ("fixed_relu", fixed_relu, FIXED_DTYPES),
    ("fixed_requantize", fixed_requantize, (int64,)),
]


def register(registry: KernelRegistry) -> None:
    """Register the fixed-point kernels for backend "cpu" (plugin.py does the same through KERNELS)."""
    for op, kernel, dtypes in KERNELS:
        registry.register(op, BACKEND, kernel, dtypes=dtypes)
