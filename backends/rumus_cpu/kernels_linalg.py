"""matmul through numpy's BLAS: operands are handed over as strided views, never copied here.

Where BLAS can take the layouts as they are (each matrix row- or column-contiguous, batch dims that
merge into one stride), csrc/gemm_blocked.c cuts the product into independent blocks that the kernels'
threads take as they come free, one single-threaded BLAS call each (see there why). Elsewhere numpy's
matmul runs it (it copies where BLAS cannot take the strides), its BLAS jobs on the same threads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, TensorArg

from ._lib import ffi, lib
from .dtypes import FLOAT


def view(arg: TensorArg) -> np.ndarray:
    """The numpy view of a TensorArg (strides and offset are in elements)."""
    buf = arg.buffer
    isz = buf.itemsize
    return np.ndarray(arg.shape, buf.dtype, buf, arg.offset * isz, tuple(s * isz for s in arg.strides))


def matmul(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """[..., n, k] @ [..., k, m] -> [..., n, m]; batch dims broadcast."""
    o = outputs[0]
    if 0 in o.shape:
        return
    a, b = inputs
    out = view(o)
    if a.shape[-1] == 0:  # k == 0: an empty sum
        out[...] = 0
        return
    gemm(view(a), view(b), out)


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = a @ b (numpy's matmul rules), every float product through csrc/gemm_blocked.c, so the
    result is the same at every thread count. Layouts BLAS cannot take are copied first (as numpy's
    matmul does internally); what is left (other dtypes, > 2 unmergeable batch dims, 1-D operands) runs
    in numpy with BLAS on one thread, for the same reason."""
    if _blocked(a, b, out):
        return out
    if _floats(a, b, out) and a.ndim >= 2 and b.ndim >= 2:
        tmp = out if out.flags.c_contiguous and not _overlaps(out, a, b) else np.empty(out.shape, out.dtype)
        if _blocked(np.ascontiguousarray(a), np.ascontiguousarray(b), tmp):
            if tmp is not out:
                out[...] = tmp
            return out
    budget = lib.rumus_get_num_threads()
    lib.rumus_blas_set_threads(1)
    try:
        np.matmul(a, b, out=out)
    finally:
        lib.rumus_blas_set_threads(budget)
    return out


def _floats(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    return bool(a.dtype == b.dtype == out.dtype and a.dtype in (np.float32, np.float64))


def _overlaps(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.may_share_memory(out, a) or np.may_share_memory(out, b))


def _lead(rows: int, cols: int, strides: tuple[int, ...]) -> tuple[int, int] | None:
    """(transposed?, leading dim) of a matrix for row-major BLAS, or None if BLAS cannot take it."""
    sr, sc = strides
    if cols == 1:
        sc = 1
    if rows == 1:
        sr = max(cols, 1)
    if sc == 1 and sr >= max(cols, 1):
        return 0, sr
    if sr == 1 and sc >= max(rows, 1):
        return 1, sc
    return None


def _batch_dims(batch: tuple[int, ...], *strides: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]] | None:
    """The batch dims merged where every operand allows it: at most two (size, strides) left, or None."""
    dims: list[tuple[int, tuple[int, ...]]] = []
    for d, size in enumerate(batch):
        if size == 1:
            continue
        st = tuple(s[d] for s in strides)
        if dims and all(p == q * size for p, q in zip(dims[-1][1], st)):
            dims[-1] = (dims[-1][0] * size, st)
        else:
            dims.append((size, st))
    return dims if len(dims) <= 2 else None


def _blocked(av: np.ndarray, bv: np.ndarray, out: np.ndarray) -> bool:
    """out = av @ bv by csrc/gemm_blocked.c; False (nothing done) where it does not apply."""
    if not lib.rumus_gemm_attached() or av.ndim < 2 or bv.ndim < 2 or out.ndim < 2 or not _floats(av, bv, out):
        return False
    if _overlaps(out, av, bv):
        return False
    batch = out.shape[:-2]
    m, k = av.shape[-2:]
    n = bv.shape[-1]
    isz = out.itemsize
    if any(s % isz for s in (*av.strides, *bv.strides, *out.strides)):
        return False
    a = np.broadcast_to(av, batch + (m, k))
    b = np.broadcast_to(bv, batch + (k, n))
    sa, sb, so = (tuple(s // isz for s in x.strides) for x in (a, b, out))
    la, lb, lo = _lead(m, k, sa[-2:]), _lead(k, n, sb[-2:]), _lead(m, n, so[-2:])
    dims = _batch_dims(batch, sa[:-2], sb[:-2], so[:-2])
    if la is None or lb is None or lo is None or lo[0] or dims is None:
        return False
    dims = [(1, (0, 0, 0))] * (2 - len(dims)) + dims  # (outer, inner)
    bs = [ffi.new("int64_t[2]", [dims[0][1][i], dims[1][1][i]]) for i in range(3)]
    ptr = [ffi.cast("void *", x.__array_interface__["data"][0]) for x in (a, b, out)]
    return bool(lib.rumus_gemm(int(out.dtype == np.float64), dims[0][0], dims[1][0], m, n, k, ptr[0], bs[0], la[1],
                               la[0], ptr[1], bs[1], lb[1], lb[0], ptr[2], bs[2], lo[1]))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [("matmul", matmul, FLOAT)]
