"""The quantized linears as dequantize + matmul: a backend that holds the packed q8 / int4 dtypes needs
their dequantize kernels only (the packed dtypes' own ops are kernels of such a backend:
rumus_contracts.primitives.PACKED_DTYPE_OPS)."""

from __future__ import annotations

from .._tensor_base import Tensor
from . import register
from ._helpers import op


@register("q8_linear")
def q8_linear(x: Tensor, w: Tensor, *, n: int, block_size: int | None) -> Tensor:
    return op("matmul")(x, op("q8_dequantize")(w, k=x.shape[1], n=n, block_size=block_size))


@register("int4_linear")
def int4_linear(x: Tensor, w: Tensor, scales: Tensor, zeros: Tensor, *, group_size: int | None) -> Tensor:
    return op("matmul")(x, op("int4_dequantize")(w, scales, zeros, k=x.shape[1], group_size=group_size))
