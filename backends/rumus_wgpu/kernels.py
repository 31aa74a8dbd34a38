"""The built-in kernel table: op -> kernel, and the dtypes claimed per op. Importing it does not
import wgpu.

float16 kernels need the device feature shader-f16 (a device without it lists no float16 in its
capabilities and refuses to compile them); int64 is two u32 words (native layout, emulated
arithmetic); bool is one u32 (0/1) per element. No float64, int8, uint8 or bfloat16 kernels: those
(op, dtype) pairs have no kernel and the core raises KernelNotFound. Composite ops need no kernel.
The nn ops (convolution, pooling, norms, dropout) live in the nn_* modules. The fixed-point ops
(fixed_linear, fixed_relu, fixed_requantize, ...) are CPU-only by design: never claimed here.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import DType, bool_, float16, float32, int32, int64

from . import elementwise, gemm, indexing, nn_conv, nn_dropout, nn_norm, nn_pool, optim, reduce, sort
from . import amp, cross_entropy, flash_attention

F = (float32, float16)
FI = (*F, int32, int64)
ALL = (*FI, bool_)

CLAIMS: dict[str, tuple[DType, ...]] = {
    # the expression-table ops: claims derived from what the WGSL renderer expresses
    **{op: dtypes for op, (_, dtypes) in elementwise.table_kernels().items()},
    "clamp": FI,
    **{op: ALL for op in ("copy", "fill")},
    # where dispatches on its bool condition in the current schema, and on its values once fixed
    "where": ALL,
    **{op: FI for op in ("sum", "prod", "amax", "amin", "argmax", "argmin")},
    "softmax": F, "log_softmax": F, "softmax_backward": F, "log_softmax_backward": F, "matmul": F,
    "adam_step": (float32,), "sgd_step": (float32,),
    **{op: ALL for op in ("gather", "index_select", "embedding")},
    **{op: F for op in ("scatter_add", "index_add", "embedding_backward")},
    **{op: F for m in (nn_conv, nn_pool, nn_norm, nn_dropout) for op in m.kernels()},
    **{op: (float32,) for op in flash_attention.kernels()},
    **{op: F for op in cross_entropy.kernels()},
    "argsort": FI,
    **{op: (float32,) for op in amp.kernels()},
}


def kernel_table() -> dict[str, Any]:
    table: dict[str, Any] = {}
    for module in (elementwise, reduce, optim, indexing, nn_conv, nn_pool, nn_norm, nn_dropout, sort,
                   flash_attention, amp, cross_entropy):
        table.update(module.kernels())
    table["matmul"] = gemm.matmul
    return table
