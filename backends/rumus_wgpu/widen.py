"""bfloat16 through float32 kernels: the widening wrapper for the ops with no native bfloat16 WGSL.

The generated elementwise ops, where, clamp, copy and fill compute on bfloat16 words natively
(elementwise.py, bf16.py). Every other op claimed for float32 (GEMM, reductions, softmax, norms,
convolution, pooling, attention, index ops, optimizer steps, ...) is claimed for bfloat16 through
`widened_to_float32`: its bfloat16 inputs are cast to float32 temporaries (exact), the float32 kernel
runs, and its bfloat16 outputs are rounded back once by the copy kernel, as the CPU backend does for
its conv/pool kernels. A kernel with no outputs updates its inputs in place (schema `inplace`: optimizer
steps, the loss scaler's ops), so each of its widened inputs is rounded back too (an input it did not
change comes back with the same bits). The temporaries cost up to twice the operands' memory for the
call; a native kernel would replace the entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, TensorArg, contiguous_strides, float32

from . import bf16, nn_norm
from .elementwise import copy
from .layout import new_buffer


def _widened(arg: TensorArg) -> TensorArg:
    """A contiguous float32 temporary shaped like `arg`, holding its values when `arg` is read."""
    buf = new_buffer(arg.buffer.dev, max(arg.numel, 1) * 4)
    return TensorArg(buf, tuple(arg.shape), contiguous_strides(tuple(arg.shape)), 0, float32)


def _batch_norm_stats_of_x(inputs: list[TensorArg], attrs: Mapping[str, Any]) -> None:
    """batch_norm in training: its mean / var inputs are batch_norm_stats(x) rounded to bfloat16 (three
    significant digits); like the narrow dtypes' own kernels, use x's statistics in float32 instead."""
    if attrs.get("training") and inputs[0].numel:
        x = inputs[0]
        stats = [_widened(inputs[3]), _widened(inputs[4])]
        nn_norm.batch_norm_stats(stats, [x], {})
        inputs[3:5] = stats


# per op: what the float32 kernel must be given instead of a widened bfloat16 input (by definition of the op)
_WIDENED_INPUTS = {"batch_norm": _batch_norm_stats_of_x}


def widened_to_float32(kernel: Kernel, op: str = "") -> Kernel:
    """`kernel` (float32) made to take bfloat16 operands, rounding each bfloat16 result once."""
    fix = _WIDENED_INPUTS.get(op)

    def run(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        wide_in = list(inputs)
        for i, x in enumerate(inputs):
            if bf16.is_bf16(x.dtype):
                wide_in[i] = _widened(x)
                copy([wide_in[i]], [x], {"dtype": "float32"})
        if fix is not None and bf16.is_bf16(inputs[0].dtype):
            fix(wide_in, attrs)
        wide_out = [_widened(o) if bf16.is_bf16(o.dtype) else o for o in outputs]
        kernel(wide_out, wide_in, attrs)
        narrow = list(zip(outputs, wide_out)) if outputs else list(zip(inputs, wide_in))
        for dst, src in narrow:
            if src is not dst:
                copy([dst], [src], {"dtype": dst.dtype.name})

    name = getattr(kernel, "__name__", "kernel")
    run.__name__ = run.__qualname__ = f"{name}_widened_to_float32"
    return run


def bfloat16_from_float32(claims: Mapping[str, Sequence[Any]], table: Mapping[str, Kernel]) -> dict[str, Kernel]:
    """op -> its widened kernel, for every op claimed for float32 but not natively for bfloat16: the
    bfloat16 column derived from the float32 one in one place."""
    return {op: widened_to_float32(table[op], op) for op, dtypes in claims.items()
            if any(getattr(d, "name", None) == "float32" for d in dtypes)
            and not any(bf16.is_bf16(d) for d in dtypes)}
