"""FlashAttention forward and backward (csrc/flash_attention.c): tiled online softmax, never an [L, S] buffer.

q, k, v and dout may be strided (multi-head attention hands over transposed views); bias and key_bias
arrive contiguous (the schema says so) and broadcast through zero strides; outputs are contiguous.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, TensorArg
from rumus_contracts.errors import OutOfMemory
from rumus_contracts.ops.attention import default_scale

from ._lib import ffi, lib
from .dtypes import FLOAT, HALF
from .widen import widened_to_float32

_SFX = {"float32": ("float *", "f32"), "float64": ("double *", "f64")}


def _p(arg: TensorArg) -> Any:
    ctype = _SFX[arg.dtype.name][0]
    return ffi.cast(ctype, ffi.from_buffer(arg.buffer)) + arg.offset


def broadcast_strides(arg: TensorArg, to: Sequence[int]) -> list[int]:
    """arg's strides aligned right against shape `to`, 0 on missing and size-1 (broadcast) dims."""
    lead = len(to) - len(arg.shape)
    out = [0] * lead
    for size, stride in zip(arg.shape, arg.strides):
        out.append(0 if size == 1 else stride)
    return out


def _config(q: TensorArg, k: TensorArg, v: TensorArg, bias: TensorArg, key_bias: TensorArg,
            dout: TensorArg | None) -> tuple[Any, Any]:
    B, H, L, D = q.shape
    S = k.shape[2]
    strides = [*q.strides, *k.strides, *v.strides, *broadcast_strides(bias, (B, H, L, S)),
               *broadcast_strides(key_bias, (B, S)), *(dout.strides if dout is not None else (0, 0, 0, 0))]
    return ffi.new("int64_t[]", [B, H, L, S, D]), ffi.new("int64_t[]", strides)


def _attrs(q: TensorArg, attrs: Mapping[str, Any]) -> tuple[int, float, float, int, int]:
    return (int(bool(attrs["is_causal"])), default_scale(q.shape[3], attrs["scale"]), float(attrs["dropout_p"]),
            int(attrs["seed"]), int(attrs["offset"]))


def flash_attention(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out, lse), (q, k, v, bias, key_bias) = outputs, inputs
    dims, strides = _config(q, k, v, bias, key_bias, None)
    fn = getattr(lib, f"rumus_flash_attention_{_SFX[q.dtype.name][1]}")
    if not fn(_p(q), _p(k), _p(v), _p(bias), _p(key_bias), _p(out), _p(lse), dims, strides, *_attrs(q, attrs)):
        raise OutOfMemory(f"flash_attention: no memory for a block's scratch (query {q.shape}); the output would "
                          "be incomplete. Free memory or use smaller batches.")


def flash_attention_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                             attrs: Mapping[str, Any]) -> None:
    (dq, dk, dv), (q, k, v, out, dout, lse, bias, key_bias) = outputs, inputs
    dims, strides = _config(q, k, v, bias, key_bias, dout)
    fn = getattr(lib, f"rumus_flash_attention_backward_{_SFX[q.dtype.name][1]}")
    if not fn(_p(q), _p(k), _p(v), _p(out), _p(dout), _p(lse), _p(bias), _p(key_bias), _p(dq), _p(dk), _p(dv), dims,
              strides, *_attrs(q, attrs)):
        raise OutOfMemory(f"flash_attention backward: no memory for its scratch (query {q.shape}); the gradients "
                          "would be incomplete. Free memory or use smaller batches.")


KERNELS: list[tuple[str, Kernel, tuple[Any, ...]]] = [
    ("flash_attention", flash_attention, FLOAT),
    ("flash_attention_backward", flash_attention_backward, FLOAT),
    # float16 / bfloat16: float32 copies in, outputs rounded once (no 16-bit C loops for attention)
    ("flash_attention", widened_to_float32(flash_attention), HALF),
    ("flash_attention_backward", widened_to_float32(flash_attention_backward), HALF),
]
