"""The built-in kernel table: op -> kernel, and the dtypes claimed per op. Importing it does not
import wgpu.

float16 kernels need the device feature shader-f16 (a device without it lists no float16 in its
capabilities and refuses to compile them); int64 is two u32 words (native layout, emulated
arithmetic); bool is one u32 (0/1) per element. bfloat16 is stored as 16-bit words, two per u32, with
f32 math: the elementwise ops (expression table, where, clamp, copy/casts, fill) run on the words
natively (bf16.py); every other op claimed for float32 is claimed for bfloat16 through its widening
wrapper (widen.py, `BFLOAT16_WIDENED`, derived from the float32 claims). No float64, int8 or uint8
kernels: those (op, dtype) pairs have no kernel and the core raises KernelNotFound. Composite ops need
no kernel. The nn ops (convolution, pooling, norms, dropout) live in the nn_* modules. The fixed-point
ops (fixed_linear, fixed_relu, fixed_requantize, ...) are CPU-only by design: never claimed here.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import DType, Kernel, bfloat16, bool_, float16, float32, int32, int64

from . import elementwise, gemm, indexing, nn_conv, nn_dropout, nn_norm, nn_pool, optim, reduce, scan, sort
from . import amp, cross_entropy, flash_attention, softmax, widen

F = (float32, float16)
FI = (*F, int32, int64)
ALL = (*FI, bool_)

CLAIMS: dict[str, tuple[DType, ...]] = {
    # the expression-table ops: claims derived from what the WGSL renderer expresses
    **{op: dtypes for op, (_, dtypes) in elementwise.table_kernels().items()},
    # bfloat16 natively (words in the elementwise skeleton); the other ops get it through widen.py
    "clamp": (*FI, bfloat16),
    **{op: (*ALL, bfloat16) for op in ("copy", "fill")},
    # where dispatches on its bool condition in the current schema, and on its values once fixed
    "where": (*ALL, bfloat16),
    **{op: FI for op in ("sum", "prod", "amax", "amin", "argmax", "argmin")},
    **{op: F for op in softmax.kernels()},  # the row ops of the table: softmax, the norms, ...
    "matmul": (*F, bfloat16),  # bfloat16 words unpacked in the GEMM's tile loads (gemm.py)
    **{op: (float32,) for op in optim.kernels()},  # adam_step(_dev_, _count_), sgd_step
    **{op: ALL for op in ("gather", "index_select", "embedding")},
    **{op: F for op in ("scatter_add", "index_add", "embedding_backward")},
    **{op: F for m in (nn_conv, nn_pool, nn_norm, nn_dropout) for op in m.kernels()},
    **{op: flash_attention.DTYPES for op in flash_attention.kernels()},  # bfloat16 natively too
    **{op: F for op in cross_entropy.kernels()},
    "argsort": FI,
    **{op: F for op in scan.kernels()},  # cumsum, cumprod: sequential per row
    **{op: (float32,) for op in amp.kernels()},
}


def kernel_table() -> dict[str, Any]:
    table: dict[str, Any] = {}
    for module in (elementwise, reduce, optim, indexing, nn_conv, nn_pool, nn_norm, nn_dropout, sort,
                   flash_attention, amp, cross_entropy, scan):
        table.update(module.kernels())
    table["matmul"] = gemm.matmul
    return table


def bfloat16_widened(table: dict[str, Any]) -> dict[str, Kernel]:
    """The bfloat16 entries of the ops with no native bfloat16 kernel (registered next to CLAIMS)."""
    return widen.bfloat16_from_float32(CLAIMS, table)
