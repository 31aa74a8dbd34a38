"""float16/bfloat16 for the convolution and pooling kernels (kernels_nn_conv), which have no 16-bit C loops:
each runs on float32 copies of its 16-bit operands and rounds its outputs back once (widen.py). The copies
are whole operands, so such a call holds up to twice its operands' memory; a native kernel taking the
16-bit words would replace the entry (an op that kernels_nn_conv claims for 16-bit floats is skipped here).
"""

from __future__ import annotations

from rumus_contracts import DType, Kernel, float32

from . import kernels_nn_conv
from .dtypes import HALF
from .widen import widened_to_float32

KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    (op, widened_to_float32(kernel), HALF)
    for op, kernel, dtypes in kernels_nn_conv.KERNELS
    if float32 in dtypes and not set(HALF) & set(dtypes)
]
