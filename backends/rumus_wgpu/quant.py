"""q8 / int4 kernels in WGSL (shaders/quant.wgsl, shaders/quant_pack.wgsl), float32 activations.

The packed words are bound as they are (a strided 1-D view too: offset and stride go in the uniform);
the shaders dequantise in registers. The matmuls are GEMV-shaped (quant.wgsl explains the tiling):
q8 gives each column 64 invocations, int4 splits K over workgroups and adds the chunks in a second
pass, so a 4096 x 4096 weight spreads over >= 1024 workgroups. Packing (q8_quantize, int4_quantize)
is byte-identical to the CPU: the rounding steps run as integer arithmetic on the floats' bits. A NaN
or inf weight is refused like on the CPU, which costs the packing op one 4-byte read (a sync).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, TensorArg, float32
from rumus_contracts.ops.quant import (INT4_DTYPES, Q8_DTYPES, int4_kernel_sizes, nonfinite_weight,
                                       q8_kernel_sizes)

from .layout import dealias, device_of, new_buffer
from .nn_common import dispatch

TARGET_GROUPS = 1024  # workgroups a GEMV should spread over to fill a large GPU


def _stride(w: TensorArg) -> int:
    return w.strides[0] if w.shape[0] > 1 else 1


def _cfg(k: int, n: int, size: int, w: TensorArg, x: TensorArg | None = None, s: TensorArg | None = None,
         z: TensorArg | None = None, o: TensorArg | None = None) -> list[int | float]:
    """shaders/quant.wgsl's Config after (count, gx)."""
    return [k, n, size, w.offset, _stride(w), 0 if x is None else x.offset, 0 if s is None else s.offset,
            0 if z is None else z.offset, 0 if o is None else o.offset]


def _gemv_cfg(m: int, k: int, n: int, size: int, w: TensorArg, x: TensorArg, o: TensorArg, col_tiles: int,
              k_chunks: int = 1, chunk_rows: int = 0, s: TensorArg | None = None,
              z: TensorArg | None = None) -> list[int | float]:
    """shaders/quant.wgsl's Gemv after (groups, gx)."""
    shift = max(size // 4, 1).bit_length() - 1
    return [m, k, n, size, shift, w.offset, _stride(w), x.offset, 0 if s is None else s.offset,
            0 if z is None else z.offset, o.offset, col_tiles, k_chunks, chunk_rows]


def q8_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _, k, n, bs = q8_kernel_sizes("q8_dequantize", outputs, inputs)
    o = outputs[0]
    dev = device_of(outputs, inputs)
    (w,), _ = dealias(dev, outputs, inputs)
    dispatch(dev, "quant", "q8_bind+q8_dequantize", float32, [o.buffer, w.buffer], _cfg(k, n, bs, w, o=o),
             o.numel, include=("grid",))


def q8_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    m, k, n, bs = q8_kernel_sizes("q8_linear", outputs, inputs)
    o = outputs[0]
    dev = device_of(outputs, inputs)
    (x, w), _ = dealias(dev, outputs, inputs)
    col_tiles = -(-n // 4)
    dispatch(dev, "quant", "gemv_cfg+q8_gemv", float32, [o.buffer, w.buffer, x.buffer],
             _gemv_cfg(m, k, n, bs, w, x, o, col_tiles), col_tiles * -(-m // 4), per_group=1)


def int4_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _, k, n, g = int4_kernel_sizes("int4_dequantize", outputs, inputs)
    o = outputs[0]
    dev = device_of(outputs, inputs)
    (w, s, z), _ = dealias(dev, outputs, inputs)
    dispatch(dev, "quant", "int4_cfg_4+int4_bind+int4_dequantize", float32, [o.buffer, w.buffer, s.buffer, z.buffer],
             _cfg(k, n, g, w, s=s, z=z, o=o), o.numel, include=("grid",))


def int4_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    m, k, n, g = int4_kernel_sizes("int4_linear", outputs, inputs)
    o = outputs[0]
    if not o.numel:
        return
    dev = device_of(outputs, inputs)
    (x, w, s, z), _ = dealias(dev, outputs, inputs)
    col_tiles, row_tiles, word_rows = -(-n // 64), -(-m // 4), -(-k // 8)
    # split K until there are enough workgroups, keeping >= 16 word rows (4 per invocation) per chunk
    k_chunks = max(1, min(-(-TARGET_GROUPS // (col_tiles * row_tiles)), word_rows // 16))
    chunk_rows = max(1, -(-word_rows // k_chunks))
    k_chunks = max(1, -(-word_rows // chunk_rows))
    partial = new_buffer(dev, k_chunks * m * n * 4, "int4 gemv partial sums")
    dispatch(dev, "quant", "gemv_cfg+int4_gemv", float32, [partial, w.buffer, s.buffer, z.buffer, x.buffer],
             _gemv_cfg(m, k, n, g, w, x, o, col_tiles, k_chunks, chunk_rows, s, z),
             col_tiles * k_chunks * row_tiles, per_group=1)
    dispatch(dev, "quant", "int4_gemv_sum", float32, [o.buffer, partial], [0, 0, k_chunks, 0, 0, 0, 0, 0, o.offset],
             m * n, include=("grid",))


def _pack(op: str, section: str, outputs: Sequence[TensorArg], w: TensorArg, size: int) -> None:
    """Run shaders/quant_pack.wgsl's `section` over w's blocks / groups, then refuse a NaN or inf
    weight: the shader raises a flag that is read back here (packing's one sync)."""
    if not outputs[0].numel:
        return
    k, n = w.shape
    dev = device_of(outputs, [w])
    flag = new_buffer(dev, 4, f"{op}: non-finite weight flag")
    dev.device.queue.write_buffer(flag.gpu, 0, bytes(4))
    offsets = [o.offset for o in outputs] + [0] * (3 - len(outputs))
    dispatch(dev, "quant_pack", section, float32, [*(o.buffer for o in outputs), flag, w.buffer],
             [k, n, size, w.offset, *offsets], n * -(-k // size), include=("grid",))
    if int.from_bytes(bytes(dev.recorder.read(flag, 0, 4)), "little"):
        raise nonfinite_weight(op)


def q8_quantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _pack("q8_quantize", "q8_pack", outputs, inputs[0], int(attrs["block_size"]))


def int4_quantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _pack("int4_quantize", "int4_pack", outputs, inputs[0], int(attrs["group_size"]))


CLAIMS: dict[str, tuple[DType, ...]] = {
    "q8_quantize": (float32,), "q8_dequantize": Q8_DTYPES, "q8_linear": (float32,),
    "int4_quantize": (float32,), "int4_dequantize": INT4_DTYPES, "int4_linear": (float32,),
}


def kernels() -> dict[str, Any]:
    return {"q8_quantize": q8_quantize, "q8_dequantize": q8_dequantize, "q8_linear": q8_linear,
            "int4_quantize": int4_quantize, "int4_dequantize": int4_dequantize, "int4_linear": int4_linear}
