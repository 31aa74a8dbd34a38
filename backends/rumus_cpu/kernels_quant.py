"""Quantized-weight kernels (SPEC C q8 blocks, SPEC D int4 groups): thin calls into csrc/quant.c.

The packed words may arrive as a strided view (the conformance suite feeds such inputs); they are
gathered into a contiguous word array first — a copy of the packed bytes, never a float expansion.
The matmuls dequantise inside the C loops (AVX2 or portable, chosen at run time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, RumusError, TensorArg, float32
from rumus_contracts.ops.quant import INT4_DTYPES, Q8_DTYPES, check_int4, check_q8_words

from ._lib import ffi, lib

BACKEND = "cpu"


def _contig(arg: TensorArg) -> np.ndarray:
    buf = arg.buffer
    if arg.is_contiguous():
        flat: np.ndarray = buf[arg.offset:arg.offset + arg.numel]
        return flat
    isz = buf.itemsize
    view = np.ndarray(arg.shape, buf.dtype, buf, arg.offset * isz, tuple(s * isz for s in arg.strides))
    return np.ascontiguousarray(view).reshape(-1)


def _words(arg: TensorArg) -> Any:
    return ffi.from_buffer("uint32_t[]", _contig(arg).view(np.uint32))


def _f32(arg: TensorArg) -> Any:
    return ffi.from_buffer("float[]", _contig(arg))


def _out(o: TensorArg, ctype: str) -> Any:
    assert o.is_contiguous()  # the dispatcher allocates fresh contiguous outputs
    return ffi.from_buffer(f"{ctype}[]", o.buffer[o.offset:o.offset + o.numel].view(
        np.uint32 if ctype == "uint32_t" else o.buffer.dtype))


def _param(dt: DType) -> int:
    assert dt.param is not None  # quantized dtypes always carry their block / group size
    return dt.param


def _finite(op: str, flat: np.ndarray) -> Any:
    """A NaN or inf has no int8 / int4 code: refuse it instead of packing garbage."""
    if not np.isfinite(flat).all():
        raise RumusError(f"{op}: the weight holds NaN or inf values; quantize finite weights only")
    return ffi.from_buffer("float[]", flat)


def q8_quantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, w = outputs[0], inputs[0]
    k, n = w.shape
    if o.numel:
        lib.rumus_q8_quantize(_out(o, "uint32_t"), _finite("q8_quantize", _contig(w)), k, n, int(attrs["block_size"]))


def q8_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, w = outputs[0], inputs[0]
    k, n = o.shape
    bs = _param(w.dtype)
    check_q8_words("q8_dequantize", w.numel, k, n, bs)
    if o.numel:
        lib.rumus_q8_dequantize(_out(o, "float"), _words(w), k, n, bs)


def q8_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, x, w = outputs[0], inputs[0], inputs[1]
    m, n = o.shape
    k = x.shape[1]
    bs = _param(w.dtype)
    check_q8_words("q8_linear", w.numel, k, n, bs)
    if o.numel:
        lib.rumus_q8_linear(_out(o, "float"), _f32(x), _words(w), m, k, n, bs)


def int4_quantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (ow, os_, oz), w = outputs, inputs[0]
    k, n = w.shape
    if ow.numel:
        lib.rumus_int4_quantize(_out(ow, "uint32_t"), _out(os_, "float"), _out(oz, "float"),
                                _finite("int4_quantize", _contig(w)), k, n, int(attrs["group_size"]))


def int4_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, (w, s, z) = outputs[0], inputs
    k, n = o.shape
    g = _param(w.dtype)
    check_int4("int4_dequantize", [w.shape, s.shape, z.shape], k, g)
    if o.numel:
        lib.rumus_int4_dequantize(_out(o, "float"), _words(w), _f32(s), _f32(z), k, n, g)


def int4_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, (x, w, s, z) = outputs[0], inputs
    m, n = o.shape
    k = x.shape[1]
    g = _param(w.dtype)
    check_int4("int4_linear", [w.shape, s.shape, z.shape], k, g)
    if o.numel:
        lib.rumus_int4_linear(_out(o, "float"), _f32(x), _words(w), _f32(s), _f32(z), m, k, n, g)


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("q8_quantize", q8_quantize, (float32,)),
    ("q8_dequantize", q8_dequantize, Q8_DTYPES),
    ("q8_linear", q8_linear, (float32,)),
    ("int4_quantize", int4_quantize, (float32,)),
    ("int4_dequantize", int4_dequantize, INT4_DTYPES),
    ("int4_linear", int4_linear, (float32,)),
]
