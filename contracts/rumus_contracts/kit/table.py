"""Reference kernels for the elementwise expression table, evaluated by numpy over strided views.

One kernel per table op (forward ops and their fused backward ops, see ops/expressions.py): the inputs'
strided views go through the table's numpy renderer and the result is written into the output view.
Floating inputs are computed in float64 and rounded once, into the output (what a fused kernel does;
float16 thus gets one rounding per op, not one per step of the expression); integer and bool inputs are
computed in their own dtype, so int64 arithmetic stays exact and wraps as in C.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..backend import Kernel
from ..dtype import DType, parse_dtype
from ..ops.expr_c import GROUPS
from ..ops.expr_numpy import evaluator as numpy_evaluator
from ..ops.expressions import Expr, all_kernels
from ..tensor_arg import TensorArg
from .views import strided_view

__all__ = ["compute_dtype", "numpy_evaluator", "table_dtypes", "table_kernel", "table_kernels"]


def compute_dtype(dtype: DType) -> np.dtype[Any]:
    """The numpy dtype a table kernel computes `dtype` in: float64 for floating dtypes, else its own."""
    return np.dtype(np.float64) if dtype.is_floating else np.dtype(dtype.numpy)


def _numpy_computes(dtype: DType) -> bool:
    # bfloat16 is stored as uint16 words: numpy has no arithmetic on it, and packed dtypes have none either
    return not dtype.is_packed and (not dtype.is_floating or np.dtype(dtype.numpy).kind == "f")


def table_dtypes(op: str, held: Collection[DType]) -> tuple[DType, ...]:
    """The dtypes a table kernel of `op` can claim on a backend holding `held`: the op's dtype group
    (the table's "float", "signed", "numeric" or "all") within `held`, less those numpy cannot compute."""
    group = GROUPS[all_kernels()[op].dtypes]
    return tuple(d for d in (parse_dtype(name) for name in group) if d in held and _numpy_computes(d))


def table_kernel(op: str) -> Kernel:
    """The reference kernel of table op `op`: ``kernel(outputs, inputs, attrs)`` over TensorArgs whose
    buffers are 1-D numpy arrays. Honours strides, offsets and stride-0 (broadcast) inputs; the output
    may alias an input (the whole result is computed before it is written)."""
    e: Expr = all_kernels()[op]
    params = dict(e.params)
    compiled: dict[np.dtype[Any], Callable[..., Any]] = {}

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        out = strided_view(outputs[0])
        if out.size == 0:
            return
        cd = compute_dtype(inputs[0].dtype)
        fn = compiled.get(cd)
        if fn is None:
            fn = compiled[cd] = numpy_evaluator(e, cd)
        args = [strided_view(a).astype(cd, copy=False) for a in inputs]
        kw = {p: float(attrs.get(p, default)) for p, default in params.items()}
        with np.errstate(all="ignore"):  # IEEE results (inf, NaN), as the other backends give them
            out[...] = fn(*args, **kw)

    kernel.__name__ = kernel.__qualname__ = f"table_{op}"
    return kernel


def table_kernels(held: Collection[DType], ops: Collection[str] | None = None,
                  ) -> list[tuple[str, Kernel, tuple[DType, ...]]]:
    """(op, kernel, dtypes) for every table op (or those in `ops`) with at least one dtype in `held`:
    what a backend's ``rumus_register_kernels`` hook passes to ``registry.register(op, backend, kernel,
    dtypes=dtypes)``."""
    out = []
    for op in all_kernels():
        if ops is not None and op not in ops:
            continue
        dtypes = table_dtypes(op, held)
        if dtypes:
            out.append((op, table_kernel(op), dtypes))
    return out
