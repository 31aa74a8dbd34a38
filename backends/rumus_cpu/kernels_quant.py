"""Quantized-weight kernels (SPEC C q8 blocks, SPEC D int4 groups): thin calls into csrc/quant.c.

The packed words may arrive as a strided view (the conformance suite feeds such inputs); they are
gathered into a contiguous word array first — a copy of the packed bytes, never a float expansion.
The matmuls dequantise inside the C loops (AVX-512 VNNI, AVX2 or portable, chosen at run time by
cpuid; RUMUS_QUANT_ISA=portable|avx2|avx512vnni forces one, and asking for more than the CPU has is
an error, never a quiet downgrade). From 16 rows of x on they run a float GEMM over dequantised
column panels instead (csrc/quant.c says why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, RumusError, TensorArg, config, float32
from rumus_contracts.ops.quant import (INT4_DTYPES, Q8_DTYPES, int4_kernel_sizes, nonfinite_weight,
                                       q8_kernel_sizes)

from ._lib import ffi, lib

BACKEND = "cpu"
ISA_NAMES = ("portable", "avx2", "avx512vnni")  # csrc/quant.c's ISA_* order
_env_applied = False


def force_isa(name: str | None) -> None:
    """Force the quantized matmuls' inner loop (None: the best the CPU has); overrides RUMUS_QUANT_ISA."""
    global _env_applied
    _env_applied = True
    if name is None:
        lib.rumus_quant_set_isa(-1)
        return
    if name not in ISA_NAMES:
        raise RumusError(f"RUMUS_QUANT_ISA={name!r} is not one of {', '.join(ISA_NAMES)}")
    best = int(lib.rumus_quant_best_isa())
    if ISA_NAMES.index(name) > best:
        raise RumusError(f"RUMUS_QUANT_ISA={name}: this CPU (or the compiler that built rumus) only has "
                         f"{', '.join(ISA_NAMES[:best + 1])}; unset it or pick one of those")
    lib.rumus_quant_set_isa(ISA_NAMES.index(name))


PANEL_MIN_ROWS = 16  # csrc/quant.c's default: from this batch on, float GEMM on dequantised panels


def set_panel_rows(min_rows: int) -> None:
    """The batch from which the matmuls run csrc/quant.c's panel GEMM instead of the register loops
    (tests raise it to reach the register loops at every batch)."""
    lib.rumus_quant_set_panel_rows(min_rows)


def quant_isa() -> str:
    """The path the quantized matmuls run now (RUMUS_QUANT_ISA applied on first use)."""
    if not _env_applied:
        force_isa(config.text("RUMUS_QUANT_ISA") or None)
    return ISA_NAMES[int(lib.rumus_quant_isa())]


def isa_feature() -> str:
    """For `rumus info`: the quantized-matmul path in force, or why RUMUS_QUANT_ISA was refused."""
    try:
        return f"quant_isa={quant_isa()}"
    except RumusError as exc:
        return f"quant_isa=refused ({exc})"


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


def _finite(op: str, flat: np.ndarray) -> Any:
    """A NaN or inf has no int8 / int4 code: refuse it instead of packing garbage."""
    if not np.isfinite(flat).all():
        raise nonfinite_weight(op)
    return ffi.from_buffer("float[]", flat)


def q8_quantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    o, w = outputs[0], inputs[0]
    k, n = w.shape
    if o.numel:
        lib.rumus_q8_quantize(_out(o, "uint32_t"), _finite("q8_quantize", _contig(w)), k, n, int(attrs["block_size"]))


def q8_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _, k, n, bs = q8_kernel_sizes("q8_dequantize", outputs, inputs)
    if outputs[0].numel:
        lib.rumus_q8_dequantize(_out(outputs[0], "float"), _words(inputs[0]), k, n, bs)


def q8_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    m, k, n, bs = q8_kernel_sizes("q8_linear", outputs, inputs)
    quant_isa()
    if outputs[0].numel:
        lib.rumus_q8_linear(_out(outputs[0], "float"), _f32(inputs[0]), _words(inputs[1]), m, k, n, bs)


def int4_quantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (ow, os_, oz), w = outputs, inputs[0]
    k, n = w.shape
    if ow.numel:
        lib.rumus_int4_quantize(_out(ow, "uint32_t"), _out(os_, "float"), _out(oz, "float"),
                                _finite("int4_quantize", _contig(w)), k, n, int(attrs["group_size"]))


def int4_dequantize(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _, k, n, g = int4_kernel_sizes("int4_dequantize", outputs, inputs)
    w, s, z = inputs
    if outputs[0].numel:
        lib.rumus_int4_dequantize(_out(outputs[0], "float"), _words(w), _f32(s), _f32(z), k, n, g)


def int4_linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    m, k, n, g = int4_kernel_sizes("int4_linear", outputs, inputs)
    x, w, s, z = inputs
    quant_isa()
    if outputs[0].numel:
        lib.rumus_int4_linear(_out(outputs[0], "float"), _f32(x), _words(w), _f32(s), _f32(z), m, k, n, g)


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("q8_quantize", q8_quantize, (float32,)),
    ("q8_dequantize", q8_dequantize, Q8_DTYPES),
    ("q8_linear", q8_linear, (float32,)),
    ("int4_quantize", int4_quantize, (float32,)),
    ("int4_dequantize", int4_dequantize, INT4_DTYPES),
    ("int4_linear", int4_linear, (float32,)),
]
