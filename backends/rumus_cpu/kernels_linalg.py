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
from .threads import gemm_threads


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
    # threads for one GEMM of the batch (numpy calls BLAS once per matrix), from its multiply-adds
    av, bv = view(a), view(b)
    if _blocked(av, bv, out):
        return
    rows, cols = (o.shape[-2] if len(o.shape) >= 2 else 1), (o.shape[-1] if o.shape else 1)
    gemm_threads(a.shape[-1] * rows * cols)
    np.matmul(av, bv, out=out)


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


def _batch_stride(shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """One stride walking all batch dims in order (0 when broadcast), or None if they do not merge."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    for (_, outer), (n, inner) in zip(dims, dims[1:]):
        if outer != inner * n:
            return None
    return dims[-1][1] if dims else 0


def _blocked(av: np.ndarray, bv: np.ndarray, out: np.ndarray) -> bool:
    """out = av @ bv by csrc/gemm_blocked.c; False (nothing done) where it does not apply."""
    if not lib.rumus_gemm_attached() or av.ndim < 2 or bv.ndim < 2 or out.ndim < 2:
        return False
    if not (av.dtype == bv.dtype == out.dtype and av.dtype in (np.float32, np.float64)):
        return False
    if np.may_share_memory(out, av) or np.may_share_memory(out, bv):
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
    ba, bb, bo = _batch_stride(batch, sa[:-2]), _batch_stride(batch, sb[:-2]), _batch_stride(batch, so[:-2])
    if la is None or lb is None or lo is None or lo[0] or ba is None or bb is None or bo is None:
        return False
    count = int(np.prod(batch)) if batch else 1
    ptr = (ffi.cast("void *", x.__array_interface__["data"][0]) for x in (a, b, out))
    return bool(lib.rumus_gemm(int(out.dtype == np.float64), count, m, n, k, next(ptr), ba, la[1], la[0],
                               next(ptr), bb, lb[1], lb[0], next(ptr), bo, lo[1]))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [("matmul", matmul, FLOAT)]
