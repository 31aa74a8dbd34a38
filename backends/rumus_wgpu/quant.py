"""q8 / int4 dequantize and linear kernels in WGSL (shaders/quant.wgsl), float32 activations.

The packed words are bound as they are (a strided 1-D view too: offset and stride go in the uniform);
the shaders dequantise in registers. Quantizing (packing) is not done on the GPU: its byte-exact
f16 / division rounding is only guaranteed by the CPU kernels, so q8_quantize / int4_quantize have no
wgpu kernel and raise KernelNotFound here (pack on the CPU, then move the words).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, TensorArg, float32
from rumus_contracts.ops.quant import INT4_DTYPES, Q8_DTYPES, check_int4, check_q8_words

from .layout import dealias, device_of
from .nn_common import dispatch


def _size(dt: DType) -> int:
    assert dt.param is not None  # quantized dtypes carry their block / group size
    return dt.param


def _cfg(count: int, k: int, n: int, size: int, w: TensorArg, x: TensorArg | None = None,
         s: TensorArg | None = None, z: TensorArg | None = None, o: TensorArg | None = None) -> list[int | float]:
    return [k, n, size, w.offset, w.strides[0] if w.shape[0] > 1 else 1, 0 if x is None else x.offset,
            0 if s is None else s.offset, 0 if z is None else z.offset, 0 if o is None else o.offset]


def q8_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, w = outputs[0], inputs[0]
    k, n = o.shape
    bs = _size(w.dtype)
    check_q8_words("q8_dequantize", w.numel, k, n, bs)
    dev = device_of(outputs, inputs)
    (w,), _ = dealias(dev, outputs, [w])
    dispatch(dev, "quant", "q8_bind+q8_dequantize", float32, [o.buffer, w.buffer], _cfg(o.numel, k, n, bs, w, o=o),
             o.numel, include=("grid",))


def q8_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, x, w = outputs[0], inputs[0], inputs[1]
    m, n = o.shape
    k = x.shape[1]
    bs = _size(w.dtype)
    check_q8_words("q8_linear", w.numel, k, n, bs)
    dev = device_of(outputs, inputs)
    (x, w), _ = dealias(dev, outputs, [x, w])
    dispatch(dev, "quant", "x_bind+q8_bind_linear+q8_linear", float32, [o.buffer, w.buffer, x.buffer],
             _cfg(o.numel, k, n, bs, w, x=x, o=o), o.numel, per_group=1)


def int4_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, (w, s, z) = outputs[0], inputs
    k, n = o.shape
    g = _size(w.dtype)
    check_int4("int4_dequantize", [w.shape, s.shape, z.shape], k, g)
    dev = device_of(outputs, inputs)
    (w, s, z), _ = dealias(dev, outputs, [w, s, z])
    dispatch(dev, "quant", "int4_cfg_4+int4_bind+int4_dequantize", float32, [o.buffer, w.buffer, s.buffer, z.buffer],
             _cfg(o.numel, k, n, g, w, s=s, z=z, o=o), o.numel, include=("grid",))


def int4_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, (x, w, s, z) = outputs[0], inputs
    m, n = o.shape
    k = x.shape[1]
    g = _size(w.dtype)
    check_int4("int4_linear", [w.shape, s.shape, z.shape], k, g)
    dev = device_of(outputs, inputs)
    (x, w, s, z), _ = dealias(dev, outputs, [x, w, s, z])
    dispatch(dev, "quant", "int4_x_5+int4_bind+int4_linear", float32,
             [o.buffer, w.buffer, s.buffer, z.buffer, x.buffer], _cfg(o.numel, k, n, g, w, x=x, s=s, z=z, o=o),
             o.numel, per_group=64)


CLAIMS: dict[str, tuple[DType, ...]] = {
    "q8_dequantize": Q8_DTYPES, "q8_linear": (float32,),
    "int4_dequantize": INT4_DTYPES, "int4_linear": (float32,),
}


def kernels() -> dict[str, Any]:
    return {"q8_dequantize": q8_dequantize, "q8_linear": q8_linear, "int4_dequantize": int4_dequantize,
            "int4_linear": int4_linear}
