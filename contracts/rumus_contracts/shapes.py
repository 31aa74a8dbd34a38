"""Shape rules shared by op schemas (the ops' "meta" functions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import IndexOutOfRange, ShapeError

Shape = tuple[int, ...]


def broadcast_shapes(op: str, *shapes: Shape) -> Shape:
    """NumPy broadcasting; the error names the op and every shape."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s, ndim - len(s)):
            if size == out[i] or size == 1:
                continue
            if out[i] == 1:
                out[i] = size
            else:
                raise ShapeError(f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                                 f"cannot be broadcast together (dim {i - ndim}: {out[i]} vs {size})")
    return tuple(out)


def elementwise(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        if len(shapes) == 1:
            return [tuple(shapes[0])]
        return [broadcast_shapes(op, *shapes)]
    return rule


def normalize_dim(op: str, dim: int, ndim: int) -> int:
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:  # PyTorch: IndexError "Dimension out of range"
        raise IndexOutOfRange(f"{op}: dim {dim} is out of range for a tensor with {ndim} dim(s) "
                         f"(expected {lo}..{hi})")
    return dim % max(ndim, 1)


def normalize_dims(op: str, dims: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """None means all dims; negative dims count from the end; duplicates are refused."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = tuple(sorted(normalize_dim(op, d, ndim) for d in dims)) if ndim else ()
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: dim {tuple(dims)} names a dimension twice")
    return out


def reduced(shape: Shape, dims: Sequence[int]) -> Shape:
    """The keepdim shape: reduced dims become 1 (kernels always write keepdim outputs)."""
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def matmul_shape(op: str, a: Shape, b: Shape) -> Shape:
    """Batched matmul of [..., n, k] @ [..., k, m]; batch dims broadcast (1-D handled by the core)."""
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"{op}: kernels take operands with >= 2 dims, got {a} and {b}")
    if a[-1] != b[-2]:
        raise ShapeError(f"{op}: shapes {a} and {b} do not fit: inner sizes {a[-1]} and {b[-2]} differ")
    batch = broadcast_shapes(op, a[:-2], b[:-2])
    return (*batch, a[-2], b[-1])
