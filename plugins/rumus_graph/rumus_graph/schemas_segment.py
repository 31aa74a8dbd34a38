"""Schemas of the segment ops: rows of `src` grouped into consecutive segments by CSR pointers `ptr`
(segment i is src[ptr[i]:ptr[i+1]]), reduced with sum / mean / max, the argmax behind max's gradient,
the broadcast back (graph_segment_expand, the adjoint of the sum) and the softmax within segments
(graph_edge_softmax: the attention weights of a node's incoming edges).

Empty segments give 0 (and argmax -1), as torch_scatter does. scatter_* in rumus_graph.functional sorts
an arbitrary index once on the host and runs these ops, so every reduction is atomic-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, DTypeError, ErrorSample, OpSchema, Sample, ShapeError, float32, float64, int32

from .structure import pointers, rows_of

Shape = tuple[int, ...]
FLOATS = (float32, float64)
TOLERANCE = {"float32": (1e-5, 1e-5)}
TOLERANCE_REASON = "segment sums of up to ~20 float32 rows, accumulated in float32"


def _check_ptr(op: str, ptr: Shape) -> int:
    if len(ptr) != 1 or ptr[0] < 1:
        raise ShapeError(f"{op}: ptr must be 1-D with n_segments + 1 >= 1 entries, got shape {ptr}")
    return ptr[0] - 1


def _reduce_shape(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        src, ptr = shapes
        if len(src) < 1:
            raise ShapeError(f"{op}: src must have at least one dim (the rows to reduce), got a 0-D tensor")
        return [(_check_ptr(op, ptr), *src[1:])]
    return rule


def _expand_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    src, ptr = shapes
    n = _check_ptr("graph_segment_expand", ptr)
    if len(src) < 1 or src[0] != n:
        raise ShapeError(f"graph_segment_expand: src must have one row per segment ({n}), got shape {src}")
    rows = attrs["num_rows"]
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ShapeError(f"graph_segment_expand: num_rows (= ptr[-1]) must be an int >= 0, got {rows!r}")
    return [(rows, *src[1:])]


def _softmax_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, ptr = shapes
    _check_ptr("graph_edge_softmax", ptr)
    if len(x) < 1:
        raise ShapeError("graph_edge_softmax: x must have at least one dim (one row per edge), got a 0-D tensor")
    return [tuple(x)]


def _dtype(op: str, out: DType | None = None, allowed: tuple[DType, ...] = FLOATS) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        if dtypes[1] != int32:
            raise DTypeError(f"{op}: ptr must be int32, got {dtypes[1]}; convert it with .int()")
        if dtypes[0] not in allowed:
            raise DTypeError(f"{op}: src must be one of {[str(d) for d in allowed]}, got {dtypes[0]}")
        return [out or dtypes[0]]
    return rule


def _segments(src: np.ndarray, ptr: np.ndarray) -> list[np.ndarray]:
    p = ptr.astype(np.int64)
    return [src[p[i]:p[i + 1]] for i in range(p.size - 1)]


def _reduce_ref(how: str) -> Any:
    def ref(src: np.ndarray, ptr: np.ndarray) -> np.ndarray:
        out = np.zeros((ptr.size - 1, *src.shape[1:]))
        for i, seg in enumerate(_segments(src, ptr)):
            if len(seg):
                out[i] = seg.sum(0) if how == "sum" else seg.mean(0) if how == "mean" else seg.max(0)
        return out
    return ref


def _argmax_ref(src: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    out = np.full((ptr.size - 1, *src.shape[1:]), -1, np.int64)
    for i, seg in enumerate(_segments(src, ptr)):
        if len(seg):
            out[i] = np.argmax(seg, axis=0) + int(ptr[i])
    return out


def _expand_ref(src: np.ndarray, ptr: np.ndarray, num_rows: int = 0) -> np.ndarray:
    return np.asarray(src[rows_of(ptr)])


def _softmax_ref(x: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x, dtype=np.float64)
    p = ptr.astype(np.int64)
    for i, seg in enumerate(_segments(x, ptr)):
        if len(seg):
            e = np.exp(seg - seg.max(axis=0))
            out[p[i]:p[i + 1]] = e / e.sum(axis=0)
    return out


# (segments, rows, trailing feature shape): empty segments, no rows, one segment, 1-D and 3-D sources
CASES: list[tuple[int, int, tuple[int, ...]]] = [
    (4, 10, (3,)), (3, 0, (2,)), (1, 5, (2,)), (6, 9, ()), (5, 12, (2, 2)), (0, 0, (3,)), (7, 25, (4,))]


def _random_ptr(rng: np.random.Generator, n: int, rows: int) -> np.ndarray:
    return pointers(np.sort(rng.integers(0, max(n, 1), rows)), n)


def _samples(kind: str) -> Any:
    def gen(rng: np.random.Generator) -> list[Sample]:
        out = []
        for n, rows, feat in CASES:
            ptr = _random_ptr(rng, n, rows)
            if kind == "expand":
                out.append(Sample([rng.uniform(-2, 2, (n, *feat)), ptr], {"num_rows": rows},
                                  name=f"{n}seg/{rows}rows/{feat}", dtypes=[None, int32]))
            else:
                src = rng.uniform(-3, 3, (rows, *feat))
                out.append(Sample([src, ptr], {}, name=f"{n}seg/{rows}rows/{feat}", dtypes=[None, int32]))
        return out
    return gen


def _errors(kind: str) -> Any:
    def gen() -> list[ErrorSample]:
        ptr = np.array([0, 2, 5], np.int32)
        attrs: dict[str, Any] = {"num_rows": 5} if kind == "expand" else {}
        src = np.ones((2, 3)) if kind == "expand" else np.ones((5, 3))
        errs = [ErrorSample([src, ptr.astype(np.int64)], attrs, DTypeError, "int32"),
                ErrorSample([src, ptr.reshape(1, 3)], attrs, ShapeError, "1-D", dtypes=[None, int32])]
        if kind == "expand":
            errs.append(ErrorSample([np.ones((3, 3)), ptr], attrs, ShapeError, "one row per segment",
                                    dtypes=[None, int32]))
        return errs
    return gen


def _expand(g: Any, ptr: Any, rows: int) -> Any:
    import rumus as rm
    return rm.ops.graph_segment_expand(g, ptr, num_rows=rows)


def _sum_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    src, ptr = ctx.inputs
    return (_expand(g, ptr, src.shape[0]), None)


def _mean_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    import rumus as rm
    src, ptr = ctx.inputs
    ones = rm.ones((src.shape[0], 1), dtype=g.dtype, device=g.device)
    count = rm.ops.graph_segment_sum(ones, ptr).clamp(min=1.0)  # (n, 1): empty segments get no gradient anyway
    return (_expand(g / count.reshape(count.shape[0], *([1] * (g.dim() - 1))), ptr, src.shape[0]), None)


def _max_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    """The gradient goes to the row that won (argmax), as torch_scatter's scatter_max does."""
    import rumus as rm
    src, ptr = ctx.inputs
    rows = src.shape[0]
    winner = _expand(rm.ops.graph_segment_argmax(src, ptr), ptr, rows)  # per row: the winning row of its segment
    here = rm.arange(rows, dtype=rm.int32, device=g.device).reshape(rows, *([1] * (src.dim() - 1)))
    return (rm.where(winner == here, _expand(g, ptr, rows), rm.zeros((), dtype=g.dtype, device=g.device)), None)


def _expand_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    import rumus as rm
    return (rm.ops.graph_segment_sum(g, ctx.inputs[1]), None)


def _softmax_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    import rumus as rm
    (y,) = ctx.outputs
    x, ptr = ctx.inputs
    inner = rm.ops.graph_segment_sum(g * y, ptr)
    return (y * (g - _expand(inner, ptr, x.shape[0])), None)


def schemas() -> list[OpSchema]:
    common: dict[str, Any] = dict(contiguous=("src", "ptr"), dtypes=FLOATS, tolerance=TOLERANCE,
                                  tolerance_reason=TOLERANCE_REASON)
    reduce_doc = "out[i] = {} of src[ptr[i]:ptr[i+1]] over rows (0 for an empty segment)"
    out = [OpSchema(f"graph_segment_{how}", ("src", "ptr"), _reduce_shape(f"graph_segment_{how}"),
                    dtype=_dtype(f"graph_segment_{how}"), differentiable=("src",), reference=_reduce_ref(how),
                    samples=_samples("reduce"), error_samples=_errors("reduce"), backward=backward,
                    doc=reduce_doc.format(how), **common)
           for how, backward in (("sum", _sum_backward), ("mean", _mean_backward), ("max", _max_backward))]
    out.append(OpSchema(
        "graph_segment_argmax", ("src", "ptr"), _reduce_shape("graph_segment_argmax"),
        dtype=_dtype("graph_segment_argmax", int32), reference=_argmax_ref, samples=_samples("reduce"),
        error_samples=_errors("reduce"), doc="the row of src (absolute) holding each segment's max, first on "
        "ties, -1 for an empty segment (what graph_segment_max's gradient follows)", **common))
    out.append(OpSchema(
        "graph_segment_expand", ("src", "ptr"), _expand_shape, attrs={"num_rows": 0},
        dtype=_dtype("graph_segment_expand", allowed=(float32, float64, int32)), differentiable=("src",),
        reference=_expand_ref, samples=_samples("expand"), error_samples=_errors("expand"),
        backward=_expand_backward, doc="out[k] = src[i] for every row k of segment i; num_rows = ptr[-1]",
        **{**common, "dtypes": (float32, float64, int32)}))
    out.append(OpSchema(
        "graph_edge_softmax", ("src", "ptr"), _softmax_shape, dtype=_dtype("graph_edge_softmax"),
        differentiable=("src",), reference=_softmax_ref, samples=_samples("reduce"), error_samples=_errors("reduce"),
        backward=_softmax_backward, doc="softmax of src's rows within each segment, per column (edges grouped by "
        "destination node: GAT's attention weights)", **common))
    return out
