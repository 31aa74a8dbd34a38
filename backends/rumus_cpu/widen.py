"""Converting wrappers: a float32 kernel run for float16/bfloat16 operands.

Used where that is the honest implementation: ops that accumulate into an output (index_add, scatter_add,
embedding's backward), whose repeated indices would otherwise round at every add, and the convolution and
pooling kernels, which have no 16-bit loops (kernels_half_widened.py). Half
inputs are widened to contiguous float32 copies (exact), the float32 kernel runs, and each half output
(and each input the op updates in place) is rounded back once through the copy kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import Kernel, TensorArg, contiguous_strides, float32

from .dtypes import HALF
from .kernels_memory import copy


def _float32_like(arg: TensorArg) -> TensorArg:
    return TensorArg(np.empty(max(arg.numel, 1), np.float32), arg.shape, contiguous_strides(arg.shape), 0, float32)


def widened_to_float32(kernel: Kernel, mutates: Sequence[int] = ()) -> Kernel:
    """`kernel` (float32) made to take float16/bfloat16 operands; `mutates`: inputs it updates in place."""

    def run(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        wide_in = list(inputs)
        for i, x in enumerate(inputs):
            if x.dtype in HALF:
                wide_in[i] = _float32_like(x)
                copy([wide_in[i]], [x], {"dtype": "float32"})
        wide_out = [_float32_like(o) if o.dtype in HALF else o for o in outputs]
        kernel(wide_out, wide_in, attrs)
        for dst, src in [*zip(outputs, wide_out), *((inputs[i], wide_in[i]) for i in mutates)]:
            if src is not dst:
                copy([dst], [src], {"dtype": dst.dtype.name})

    name = getattr(kernel, "__name__", "kernel")
    run.__name__ = run.__qualname__ = f"{name}_widened_to_float32"
    return run
