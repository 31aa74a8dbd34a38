"""Schemas of the sparse-matrix ops: A @ X (graph_spmm), A.T @ X (graph_spmm_t) and the sampled dense
product (graph_sddmm), each over the structure bundle of rumus_graph.structure plus values.

The three are each other's gradients, so backward never sorts or transposes anything:
    out = A @ X      d/dval = sddmm(g, X)      d/dX = A.T @ g
    out = A.T @ X    d/dval = sddmm(X, g)      d/dX = A @ g
    out = sddmm(P,Q) d/dP = A_g @ Q             d/dQ = A_g.T @ P     (A_g: the structure with values g)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, DTypeError, ErrorSample, OpSchema, Sample, ShapeError, float32, float64, int32

from .structure import random_bundle, rows_of

Shape = tuple[int, ...]
BUNDLE = ("rowptr", "col", "csc_ptr", "csc_row", "csc_eid")
FLOATS = (float32, float64)
TOLERANCE = {"float32": (1e-5, 1e-5)}
TOLERANCE_REASON = "each output sums up to ~30 float32 products, accumulated in float32"


def check_bundle(op: str, shapes: Sequence[Shape]) -> tuple[int, int, int]:
    """(n_rows, n_cols, nnz) of a structure bundle's shapes; ShapeError names the inconsistent array."""
    rowptr, col, csc_ptr, csc_row, csc_eid = shapes[:5]
    for name, s in zip(BUNDLE, shapes[:5]):
        if len(s) != 1:
            raise ShapeError(f"{op}: {name} must be 1-D, got shape {s}")
    if rowptr[0] < 1 or csc_ptr[0] < 1:
        raise ShapeError(f"{op}: rowptr and csc_ptr need n + 1 >= 1 entries, got {rowptr} and {csc_ptr}")
    nnz = col[0]
    if csc_row[0] != nnz or csc_eid[0] != nnz:
        raise ShapeError(f"{op}: col, csc_row and csc_eid must all have nnz entries, got {col}, {csc_row}, {csc_eid}")
    return rowptr[0] - 1, csc_ptr[0] - 1, nnz


def _dense(op: str, name: str, shape: Shape, rows: int) -> int:
    if len(shape) != 2 or shape[0] != rows:
        raise ShapeError(f"{op}: {name} must be 2-D with {rows} rows, got shape {shape}")
    return shape[1]


def _spmm_shape(transpose: bool) -> Any:
    op = "graph_spmm_t" if transpose else "graph_spmm"

    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        n, m, nnz = check_bundle(op, shapes)
        if tuple(shapes[5]) != (nnz,):
            raise ShapeError(f"{op}: val must have shape ({nnz},) (one value per entry), got {shapes[5]}")
        src, dst = (n, m) if transpose else (m, n)
        f = _dense(op, "x", shapes[6], src)
        return [(dst, f)]
    return rule


def _sddmm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    n, m, nnz = check_bundle("graph_sddmm", shapes)
    f = _dense("graph_sddmm", "a", shapes[5], n)
    if _dense("graph_sddmm", "b", shapes[6], m) != f:
        raise ShapeError(f"graph_sddmm: a {shapes[5]} and b {shapes[6]} must have the same number of columns")
    return [(nnz,)]


def float_dtype(op: str, n_index: int) -> Any:
    """The rule of ops whose first `n_index` inputs are int32 indices and whose others share one float dtype."""
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        for k, dt in enumerate(dtypes[:n_index]):
            if dt != int32:
                raise DTypeError(f"{op}: index input {k} must be int32, got {dt}; build indices with "
                                 f"rumus_graph.SparseTensor (or convert with .int())")
        floats = set(dtypes[n_index:])
        if len(floats) != 1:
            raise DTypeError(f"{op}: the value inputs must share one dtype, got {sorted(map(str, floats))}")
        return [dtypes[n_index]]
    return rule


def _spmm_ref(rowptr: np.ndarray, col: np.ndarray, cp: np.ndarray, cr: np.ndarray, ce: np.ndarray,
              val: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.zeros((rowptr.size - 1, x.shape[1]))
    np.add.at(out, rows_of(rowptr), val[:, None] * x[col.astype(np.int64)])
    return out


def _spmm_t_ref(rowptr: np.ndarray, col: np.ndarray, cp: np.ndarray, cr: np.ndarray, ce: np.ndarray,
                val: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.zeros((cp.size - 1, x.shape[1]))
    np.add.at(out, col.astype(np.int64), val[:, None] * x[rows_of(rowptr)])
    return out


def _sddmm_ref(rowptr: np.ndarray, col: np.ndarray, cp: np.ndarray, cr: np.ndarray, ce: np.ndarray,
               a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum(a[rows_of(rowptr)] * b[col.astype(np.int64)], axis=1))


# (n_rows, n_cols, nnz, features): empty rows/columns, no entries, one row, duplicates, a wide one
CASES = [(4, 5, 10, 3), (3, 3, 0, 2), (1, 6, 4, 1), (6, 2, 12, 4), (5, 7, 0, 0), (9, 8, 30, 5)]
BIG = (64, 48, 400, 16)  # forward only: the finite-difference check would take too long


def _samples(kind: str) -> Any:
    def gen(rng: np.random.Generator) -> list[Sample]:
        out = []
        for n, m, nnz, f in [*CASES, BIG]:
            b, _ = random_bundle(rng, n, m, nnz)
            nnz = b.col.size
            if kind == "sddmm":
                dense = [rng.uniform(-2, 2, (n, f)), rng.uniform(-2, 2, (m, f))]
            else:
                dense = [rng.uniform(-2, 2, nnz), rng.uniform(-2, 2, ((n if kind == "spmm_t" else m), f))]
            out.append(Sample([*b, *dense], {}, grad=(n, m, nnz, f) != BIG, name=f"{n}x{m}/nnz{nnz}/f{f}",
                              dtypes=[int32] * 5 + [None, None]))
        return out
    return gen


def _errors(kind: str) -> Any:
    def gen() -> list[ErrorSample]:
        b, _ = random_bundle(np.random.default_rng(0), 3, 4, 6)
        ints: list[DType | None] = [int32] * 5 + [None, None]
        good: list[np.ndarray]
        bad: list[np.ndarray]
        if kind == "sddmm":
            good = [np.ones((3, 2)), np.ones((4, 2))]
            bad = [np.ones((3, 2)), np.ones((4, 3))]
        else:
            rows = 3 if kind == "spmm_t" else 4
            good = [np.ones(6), np.ones((rows, 2))]
            bad = [np.ones(6), np.ones((rows + 1, 2))]
        return [ErrorSample([*b, *bad], {}, ShapeError, "rows" if kind != "sddmm" else "columns", dtypes=ints),
                ErrorSample([*b[:4], b.csc_eid.astype(np.int64), *good], {}, DTypeError, "int32",
                            dtypes=[int32] * 4 + [None, None, None])]
    return gen


def _needs(ctx: Any) -> tuple[bool, bool]:
    """Whether the two value inputs need a gradient (both when the core does not say)."""
    need = getattr(ctx, "needs_input_grad", None)
    return (True, True) if need is None else (bool(need[5]), bool(need[6]))


def _spmm_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    import rumus as rm
    *bundle, val, x = ctx.inputs
    nv, nx = _needs(ctx)
    return (None, None, None, None, None, rm.ops.graph_sddmm(*bundle, g, x) if nv else None,
            rm.ops.graph_spmm_t(*bundle, val, g) if nx else None)


def _spmm_t_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    import rumus as rm
    *bundle, val, x = ctx.inputs
    nv, nx = _needs(ctx)
    return (None, None, None, None, None, rm.ops.graph_sddmm(*bundle, x, g) if nv else None,
            rm.ops.graph_spmm(*bundle, val, g) if nx else None)


def _sddmm_backward(ctx: Any, g: Any) -> tuple[Any, ...]:
    import rumus as rm
    *bundle, a, b = ctx.inputs
    na, nb = _needs(ctx)
    return (None, None, None, None, None, rm.ops.graph_spmm(*bundle, g, b) if na else None,
            rm.ops.graph_spmm_t(*bundle, g, a) if nb else None)


def schemas() -> list[OpSchema]:
    common: dict[str, Any] = dict(dtypes=FLOATS, dispatch_on=5, tolerance=TOLERANCE,
                                  tolerance_reason=TOLERANCE_REASON)
    return [
        OpSchema("graph_spmm", (*BUNDLE, "val", "x"), _spmm_shape(False), dtype=float_dtype("graph_spmm", 5),
                 contiguous=(*BUNDLE, "val", "x"), differentiable=("val", "x"), reference=_spmm_ref,
                 samples=_samples("spmm"), error_samples=_errors("spmm"), backward=_spmm_backward,
                 doc="A @ x: out[i] = sum over entries k of row i of val[k] * x[col[k]] (A: n_rows x n_cols)",
                 **common),
        OpSchema("graph_spmm_t", (*BUNDLE, "val", "x"), _spmm_shape(True), dtype=float_dtype("graph_spmm_t", 5),
                 contiguous=(*BUNDLE, "val", "x"), differentiable=("val", "x"), reference=_spmm_t_ref,
                 samples=_samples("spmm_t"), error_samples=_errors("spmm_t"), backward=_spmm_t_backward,
                 doc="A.T @ x over the column-grouped arrays: out[j] = sum over entries k of column j of "
                     "val[k] * x[row[k]]", **common),
        OpSchema("graph_sddmm", (*BUNDLE, "a", "b"), _sddmm_shape, dtype=float_dtype("graph_sddmm", 5),
                 contiguous=(*BUNDLE, "a", "b"), differentiable=("a", "b"), reference=_sddmm_ref,
                 samples=_samples("sddmm"), error_samples=_errors("sddmm"), backward=_sddmm_backward,
                 doc="sampled dense-dense product: out[k] = dot(a[row[k]], b[col[k]]) for every stored entry k",
                 **common),
    ]
