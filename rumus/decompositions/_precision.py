"""float16 / bfloat16 inputs of the nn decompositions are computed in float32 and rounded once at the
end, as the fused kernels do: a chain of ops each rounding to half precision (a scatter_add summing
window contributions, a mean, a softmax) would fall outside the tolerances the kernels are held to."""

from __future__ import annotations

from rumus_contracts import DType, float32

from .. import _math as M
from .._tensor_base import Tensor

_HALF = ("float16", "bfloat16")


def widen(*ts: Tensor) -> list[Tensor]:
    """The tensors in float32 when they are half precision (unchanged otherwise)."""
    return [M.cast(t, float32) if t.dtype.name in _HALF else t for t in ts]


def narrow(t: Tensor, dtype: DType) -> Tensor:
    """t in dtype (the op's output dtype), cast only if it was widened."""
    return t if t.dtype == dtype else M.cast(t, dtype)
