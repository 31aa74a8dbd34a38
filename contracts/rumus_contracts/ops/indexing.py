"""Integer-indexed ops: embedding (and its accumulating backward), index_select/index_add, gather/scatter_add.

Indices are int64 or int32 tensors; `dim` reaching a kernel is non-negative (the core normalizes it).
Out-of-range indices are a user error: a backend that can check them cheaply raises ShapeError (the CPU
backend does); one that cannot (a GPU, without a host sync) must still never read or write outside its
buffers. The forward ops only move elements, so they take every plain dtype; the accumulating ops
(embedding_backward, index_add, scatter_add) are defined for floating dtypes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES, DType, int32
from ..errors import DTypeError, IndexOutOfRange, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from ._common import ALL

INDEX_DTYPES = ("int64", "int32")


def _check_index(op: str, dtype: DType, what: str = "indices") -> None:
    if dtype.name not in INDEX_DTYPES:
        raise DTypeError(f"{op}: {what} must be int64 or int32, got {dtype}; convert them with .long()")


def _check_dim(op: str, dim: int, ndim: int) -> int:
    if not 0 <= int(dim) < max(ndim, 1):
        raise IndexOutOfRange(f"{op}: dim {dim} is out of range for a tensor with {ndim} dim(s)")
    return int(dim)


def _first_dtype(index_pos: int, op: str) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        _check_index(op, dtypes[index_pos])
        return [dtypes[0]]
    return rule


# ---- embedding ------------------------------------------------------------------------------------

def _embedding_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    weight, indices = shapes
    if len(weight) != 2:
        raise ShapeError(f"embedding: the weight must be 2-D [num_embeddings, embedding_dim], got shape {weight}")
    return [(*indices, weight[1])]


def _embedding_ref(weight: np.ndarray, indices: np.ndarray, padding_idx: int | None = None) -> Any:
    return weight[indices.astype(np.int64)]


def _embedding_backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    grad, indices = shapes
    if len(grad) != len(indices) + 1 or tuple(grad[:-1]) != tuple(indices):
        raise ShapeError(f"embedding_backward: grad of shape {grad} does not fit indices of shape {indices} "
                         f"(expected (*indices.shape, embedding_dim))")
    if int(attrs["num_weights"]) < 0:
        raise ShapeError(f"embedding_backward: num_weights must be >= 0, got {attrs['num_weights']}")
    return [(int(attrs["num_weights"]), grad[-1])]


def _embedding_backward_ref(grad: np.ndarray, indices: np.ndarray, num_weights: int,
                            padding_idx: int | None = None) -> Any:
    out = np.zeros((num_weights, grad.shape[-1]))
    np.add.at(out, indices.astype(np.int64).reshape(-1), grad.reshape(-1, grad.shape[-1]))
    if padding_idx is not None:
        out[padding_idx] = 0.0
    return out


def _embedding_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for (v, d), ishape, pad in (((10, 4), (3,), None), ((7, 5), (2, 6), 2), ((4, 3), (), None),
                                ((5, 1), (0,), None), ((6, 33), (4, 3, 2), None), ((3, 2), (9,), 0)):
        idx = rng.integers(0, v, ishape)
        if idx.size > 3:
            idx.reshape(-1)[:2] = idx.reshape(-1)[2]  # repeated indices: gradients must accumulate
        for idx_dtype in (None, int32):
            # padding_idx deliberately cuts the padding row's gradient, which finite differences cannot
            # see: those samples check the forward here and the gradient through embedding_backward's samples
            out.append(Sample([rng.uniform(-2, 2, (v, d)), idx], {"padding_idx": pad}, grad=pad is None,
                              dtypes=[None, idx_dtype], name=f"{(v, d)}[{ishape}]/{idx_dtype or 'int64'}"))
    return out


def _embedding_backward_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for v, ishape, d, pad in ((10, (3,), 4, None), (7, (2, 6), 5, 2), (4, (), 3, None), (5, (0,), 2, None),
                              (3, (20,), 8, 0), (6, (4, 3, 2), 33, None)):
        idx = rng.integers(0, v, ishape)
        if idx.size > 3:
            idx.reshape(-1)[:3] = idx.reshape(-1)[3]
        for idx_dtype in (None, int32):
            out.append(Sample([rng.uniform(-2, 2, (*ishape, d)), idx], {"num_weights": v, "padding_idx": pad},
                              dtypes=[None, idx_dtype], name=f"{v}x{d}[{ishape}]/{idx_dtype or 'int64'}"))
    return out


def _embedding_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros(4), np.zeros(2, np.int64)], {}, ShapeError, "2-D"),
            ErrorSample([np.zeros((4, 2)), np.zeros(2)], {}, DTypeError, "int64 or int32")]


# ---- index_select / index_add ---------------------------------------------------------------------

def _selected_shape(op: str, x: Shape, index: Shape, dim: int) -> tuple[Shape, int]:
    """x's shape with the n entries of a 0-D or 1-D index along dim (what index_select returns and what
    index_add's source must be), and dim normalised."""
    if len(index) > 1:
        raise ShapeError(f"{op}: the index must be 0-D or 1-D, got shape {index}")
    if not x:
        raise ShapeError(f"{op}: needs a tensor with at least 1 dim")
    d = _check_dim(op, dim, len(x))
    return (*x[:d], index[0] if index else 1, *x[d + 1:]), d


def _index_select_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, index = shapes
    return [_selected_shape("index_select", x, index, attrs["dim"])[0]]


def _index_select_ref(x: np.ndarray, index: np.ndarray, dim: int) -> Any:
    return np.take(x, index.astype(np.int64).reshape(-1), axis=dim)


def _index_add_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, index, source = shapes
    want, d = _selected_shape("index_add", x, index, attrs["dim"])
    if tuple(source) != want:
        raise ShapeError(f"index_add: source of shape {source} does not fit x of shape {x} and {want[d]} indices "
                         f"along dim {d} (expected {want})")
    return [tuple(x)]


def _index_add_ref(x: np.ndarray, index: np.ndarray, source: np.ndarray, dim: int, alpha: float = 1.0) -> Any:
    out = np.moveaxis(x.copy(), dim, 0)
    np.add.at(out, index.astype(np.int64).reshape(-1), np.moveaxis(source, dim, 0) * alpha)
    return np.moveaxis(out, 0, dim)


def _index_dtype(op: str) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        _check_index(op, dtypes[1], "the index")
        if len(dtypes) > 2 and dtypes[2] != dtypes[0]:
            raise DTypeError(f"{op}: source dtype {dtypes[2]} differs from the tensor's {dtypes[0]}")
        return [dtypes[0]]
    return rule


INDEX_CASES: tuple[tuple[Shape, int, int], ...] = (
    ((5, 3), 0, 4), ((5, 3), 1, 6), ((2, 3, 4), 1, 5), ((7,), 0, 3), ((4, 0), 0, 2), ((3, 4), 0, 0),
    ((6, 9), 1, 12),
)


def _index_select_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape, dim, n in INDEX_CASES:
        idx = rng.integers(0, shape[dim], n) if shape[dim] else np.zeros(0, np.int64)
        for idx_dtype in (None, int32):
            out.append(Sample([rng.uniform(-2, 2, shape), idx], {"dim": dim}, dtypes=[None, idx_dtype],
                              name=f"{shape}/{dim}/{n}/{idx_dtype or 'int64'}"))
    out.append(Sample([rng.uniform(-2, 2, (4, 3)), np.array(2)], {"dim": 0}, name="0-d index"))
    return out


def _index_add_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape, dim, n in INDEX_CASES:
        idx = rng.integers(0, shape[dim], n) if shape[dim] else np.zeros(0, np.int64)
        src_shape = (*shape[:dim], n, *shape[dim + 1:])
        for idx_dtype, alpha in ((None, 1.0), (int32, -0.5)):
            out.append(Sample([rng.uniform(-2, 2, shape), idx, rng.uniform(-2, 2, src_shape)],
                              {"dim": dim, "alpha": alpha}, dtypes=[None, idx_dtype, None],
                              name=f"{shape}/{dim}/{n}/{idx_dtype or 'int64'}"))
    return out


def _index_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((4, 2)), np.zeros((2, 2), np.int64)], {"dim": 0}, ShapeError, "1-D"),
            ErrorSample([np.zeros((4, 2)), np.zeros(2)], {"dim": 0}, DTypeError, "int64 or int32")]


# ---- gather / scatter_add -------------------------------------------------------------------------

def _gather_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, index = shapes
    if len(index) != len(x):
        raise ShapeError(f"gather: index of shape {index} needs as many dims as the input's shape {x}")
    d = _check_dim("gather", attrs["dim"], len(x))
    if any(index[i] > x[i] for i in range(len(x)) if i != d):
        raise ShapeError(f"gather: index of shape {index} is larger than the input's shape {x} outside dim {d}")
    return [tuple(index)]


def _scatter_add_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, index, src = shapes
    if len(index) != len(x):
        raise ShapeError(f"scatter_add: index of shape {index} needs as many dims as the input's shape {x}")
    d = _check_dim("scatter_add", attrs["dim"], len(x))
    if tuple(src) != tuple(index):
        raise ShapeError(f"scatter_add: src of shape {src} must have the index's shape {index}")
    if any(index[i] > x[i] for i in range(len(x)) if i != d):
        raise ShapeError(f"scatter_add: index of shape {index} is larger than the input's shape {x} "
                         f"outside dim {d}")
    return [tuple(x)]


def _full_index(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    grids: list[np.ndarray] = [np.asarray(g) for g in np.indices(index.shape)] if index.ndim else []
    if index.ndim:
        grids[dim] = index.astype(np.int64)
    return tuple(grids)


def _gather_ref(x: np.ndarray, index: np.ndarray, dim: int) -> Any:
    if x.ndim == 0:
        return x.copy()
    return x[_full_index(index, dim)]


def _scatter_add_ref(x: np.ndarray, index: np.ndarray, src: np.ndarray, dim: int) -> Any:
    out = x.copy()
    if x.ndim == 0:
        return out + src
    np.add.at(out, _full_index(index, dim), src)
    return out


GATHER_CASES: tuple[tuple[Shape, Shape, int], ...] = (
    ((4, 5), (4, 1), 1), ((4, 5), (4, 7), 1), ((4, 5), (3, 2), 0), ((2, 3, 4), (2, 2, 4), 2),
    ((2, 3, 4), (1, 5, 2), 1), ((6,), (9,), 0), ((3, 4), (0, 4), 0), ((33, 9), (33, 3), 1),
)


def _gather_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for xs, ishape, dim in GATHER_CASES:
        idx = rng.integers(0, xs[dim], ishape)
        for idx_dtype in (None, int32):
            out.append(Sample([rng.uniform(-2, 2, xs), idx], {"dim": dim}, dtypes=[None, idx_dtype],
                              name=f"{xs}/{ishape}/{dim}/{idx_dtype or 'int64'}"))
    return out


def _scatter_add_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for xs, ishape, dim in GATHER_CASES:
        idx = rng.integers(0, xs[dim], ishape)
        for idx_dtype in (None, int32):
            out.append(Sample([rng.uniform(-2, 2, xs), idx, rng.uniform(-2, 2, ishape)], {"dim": dim},
                              dtypes=[None, idx_dtype, None], name=f"{xs}/{ishape}/{dim}/{idx_dtype or 'int64'}"))
    return out


def _gather_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((4, 2)), np.zeros(2, np.int64)], {"dim": 0}, ShapeError, "as many dims"),
            ErrorSample([np.zeros((4, 2)), np.zeros((4, 3), np.int64)], {"dim": 0}, ShapeError, "larger"),
            ErrorSample([np.zeros((4, 2)), np.zeros((4, 2))], {"dim": 0}, DTypeError, "int64 or int32")]


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "embedding", ("weight", "indices"), _embedding_shape, attrs={"padding_idx": None},
        dtype=_first_dtype(1, "embedding"), dtypes=ALL, contiguous=("weight", "indices"),
        differentiable=("weight",), reference=_embedding_ref, samples=_embedding_samples,
        error_samples=_embedding_errors,
        doc="rows of weight [V, D] picked by integer indices [...] -> [..., D]; padding_idx (normalized to "
            ">= 0, or None) only matters to the backward, which leaves that row's gradient zero"))
    registry.register(OpSchema(
        "embedding_backward", ("grad", "indices"), _embedding_backward_shape,
        attrs={"num_weights": 0, "padding_idx": None}, dtype=_first_dtype(1, "embedding_backward"),
        dtypes=FLOAT_DTYPES, contiguous=("grad", "indices"), differentiable=("grad",),
        reference=_embedding_backward_ref, samples=_embedding_backward_samples,
        doc="zeros [num_weights, D] with grad's rows accumulated at their indices (repeats add up); the "
            "padding_idx row stays zero"))
    registry.register(OpSchema(
        "index_select", ("x", "index"), _index_select_shape, attrs={"dim": 0}, dtype=_index_dtype("index_select"),
        dtypes=ALL, contiguous=("x", "index"), differentiable=("x",), reference=_index_select_ref,
        samples=_index_select_samples, error_samples=_index_errors,
        doc="x's slices along dim picked by a 0-D/1-D integer index (repeats allowed)"))
    registry.register(OpSchema(
        "index_add", ("x", "index", "source"), _index_add_shape, autocast="promote", attrs={"dim": 0, "alpha": 1.0},
        dtype=_index_dtype("index_add"), dtypes=FLOAT_DTYPES, contiguous=("x", "index", "source"),
        differentiable=("x", "source"), reference=_index_add_ref, samples=_index_add_samples,
        doc="out-of-place index_add: x with alpha * source's slices added at index along dim (repeats add up)"))
    registry.register(OpSchema(
        "gather", ("x", "index"), _gather_shape, attrs={"dim": 0}, dtype=_index_dtype("gather"), dtypes=ALL,
        contiguous=("index",), differentiable=("x",), reference=_gather_ref, samples=_gather_samples,
        error_samples=_gather_errors,
        doc="out[i][j][k] = x[i][index[i][j][k]][k] (dim=1); index has x's ndim and is no larger outside dim"))
    registry.register(OpSchema(
        "scatter_add", ("x", "index", "src"), _scatter_add_shape, autocast="promote", attrs={"dim": 0},
        dtype=_index_dtype("scatter_add"), dtypes=FLOAT_DTYPES, contiguous=("index", "src"),
        differentiable=("x", "src"), reference=_scatter_add_ref, samples=_scatter_add_samples,
        doc="out-of-place scatter_add: x with src[i][j][k] added at [i][index[i][j][k]][k] (dim=1)"))
