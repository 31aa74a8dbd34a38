"""matmul through numpy's BLAS: operands are handed over as strided views, never copied here.

Where BLAS can take the layouts as they are (each matrix row- or column-contiguous, batch dims that
merge into one stride), csrc/gemm_blocked.c cuts the product into independent blocks that the kernels'
threads take as they come free, one single-threaded BLAS call each (see there why). Elsewhere numpy's
matmul runs it (it copies where BLAS cannot take the strides), its BLAS jobs on the same threads.
float16/bfloat16 go through csrc/gemm_half.c: float32 BLAS on panels converted tile by tile."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, TensorArg, contiguous_strides
from rumus_contracts.kit import strided_view as view  # numpy view of a TensorArg (size-0 dims included)

from ._lib import ffi, lib, ptr as _ptr
from .dtypes import FLOAT, HALF
from .kernels_reduce import reduction


def matmul(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """[..., n, k] @ [..., k, m] -> [..., n, m]; batch dims broadcast."""
    o = outputs[0]
    a, b = inputs
    ob = o.buffer
    g = _layouts.get((o.shape, a.shape, b.shape, a.strides, b.strides, o.strides, ob.dtype, a.buffer.dtype,
                      b.buffer.dtype))
    if g is not None and ob is not a.buffer and ob is not b.buffer:  # a layout the C GEMM took before
        isz = ob.itemsize
        if lib.rumus_gemm(g[0], g[1], g[2], g[3], g[4], g[5], (a.native or _ptr(a)) + a.offset * isz, g[6], g[7],
                          g[8], g[9], (b.native or _ptr(b)) + b.offset * isz, g[10], g[11], g[12], g[13],
                          (o.native or _ptr(o)) + o.offset * isz, g[14], g[15], g[16]):
            return
    if 0 in o.shape:
        return
    if a.shape[-1] == 0:  # k == 0: an empty sum
        view(o)[...] = 0
        return
    if o.dtype in HALF:
        _half_matmul(o, a, b)
        return
    # the fast path: shapes and strides straight from the TensorArgs (a training step makes many small calls)
    if len(a.shape) >= 2 and len(b.shape) >= 2 and o.buffer is not a.buffer and o.buffer is not b.buffer:
        isz = ob.itemsize
        args = _gemm_args(ob.dtype, o.shape, a.shape, b.shape, a.strides, b.strides, o.strides, a.buffer.dtype,
                          b.buffer.dtype)
        if args is not None and lib.rumus_gemm_attached():
            if len(_layouts) < 4096:
                _layouts[o.shape, a.shape, b.shape, a.strides, b.strides, o.strides, ob.dtype, a.buffer.dtype,
                         b.buffer.dtype] = args
            if _call(args, (a.native or _ptr(a)) + a.offset * isz, (b.native or _ptr(b)) + b.offset * isz,
                     (o.native or _ptr(o)) + o.offset * isz):
                return
    gemm(view(a), view(b), view(o))


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = a @ b (numpy's matmul rules), every float product through csrc/gemm_blocked.c, so the
    result is the same at every thread count. Layouts BLAS cannot take are copied first (as numpy's
    matmul does internally); what is left (other dtypes, > 2 unmergeable batch dims, 1-D operands) runs
    in numpy with BLAS on one thread, for the same reason."""
    if _blocked(a, b, out):
        return out
    if a.dtype == b.dtype == out.dtype and a.dtype in _FLOATS and a.ndim >= 2 and b.ndim >= 2:
        tmp = out if out.flags.c_contiguous and not _overlaps(out, a, b) else np.empty(out.shape, out.dtype)
        if _blocked(np.ascontiguousarray(a), np.ascontiguousarray(b), tmp):
            if tmp is not out:
                out[...] = tmp
            return out
    lib.rumus_blas_serial_begin()
    try:
        np.matmul(a, b, out=out)
    finally:
        lib.rumus_blas_serial_end()
    return out


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_from_buffer = ffi.from_buffer


def _overlaps(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.may_share_memory(out, a) or np.may_share_memory(out, b))


def _blocked(av: np.ndarray, bv: np.ndarray, out: np.ndarray) -> bool:
    """out = av @ bv by csrc/gemm_blocked.c, for numpy arrays; False (nothing done) where it does not apply."""
    if av.ndim < 2 or bv.ndim < 2 or out.ndim < 2 or _overlaps(out, av, bv):
        return False
    isz = out.itemsize
    if any(s % isz for s in (*av.strides, *bv.strides, *out.strides)):
        return False
    el = (tuple(s // isz for s in x.strides) for x in (av, bv, out))
    ptr = (ffi.cast("char *", x.ctypes.data) for x in (av, bv, out))
    return _run(out.dtype, out.shape, av.shape, bv.shape, next(el), next(el), next(el), next(ptr), next(ptr),
                next(ptr), av.dtype, bv.dtype)


def _lead(rows: int, cols: int, sr: int, sc: int) -> tuple[int, int] | None:
    """(transposed?, leading dim) of a matrix for row-major BLAS, or None if BLAS cannot take it."""
    if cols == 1:
        sc = 1
    if rows == 1:
        sr = max(cols, 1)
    if sc == 1 and sr >= max(cols, 1):
        return 0, sr
    if sr == 1 and sc >= max(rows, 1):
        return 1, sc
    return None


def _batch_strides(batch: tuple[int, ...], shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """An operand's strides over the output's batch dims (0 where it is broadcast)."""
    lead = len(batch) - (len(shape) - 2)
    return [0 if d < lead or shape[d - lead] == 1 else strides[d - lead] for d in range(len(batch))]


# (output shape, a's and b's shapes, their strides, the output's, the three numpy dtypes) -> _gemm_args of a
# non-empty product the C GEMM takes: a training step makes the same small products every step
_layouts: dict[tuple[Any, ...], tuple[int, ...]] = {}


def _run(dtype: Any, oshape: tuple[int, ...], ashape: tuple[int, ...], bshape: tuple[int, ...],
         sa: tuple[int, ...], sb: tuple[int, ...], so: tuple[int, ...], pa: Any, pb: Any, po: Any,
         adt: Any, bdt: Any) -> bool:
    """The C call, if the layouts allow it: strides in elements, pointers at the first elements."""
    if not lib.rumus_gemm_attached():
        return False
    args = _gemm_args(dtype, oshape, ashape, bshape, sa, sb, so, adt, bdt)
    return args is not None and _call(args, pa, pb, po)


def _call(g: tuple[int, ...], pa: Any, pb: Any, po: Any) -> bool:
    """rumus_gemm with _gemm_args' integers around the three pointers."""
    return bool(lib.rumus_gemm(g[0], g[1], g[2], g[3], g[4], g[5], pa, g[6], g[7], g[8], g[9], pb, g[10], g[11],
                               g[12], g[13], po, g[14], g[15], g[16]))


def _gemm_args(dtype: Any, oshape: tuple[int, ...], ashape: tuple[int, ...], bshape: tuple[int, ...],
               sa: tuple[int, ...], sb: tuple[int, ...], so: tuple[int, ...], adt: Any, bdt: Any
               ) -> tuple[int, ...] | None:
    """rumus_gemm's integer arguments for this layout (strides in elements), or None where it cannot take it."""
    if not (dtype == adt == bdt and dtype in _FLOATS):
        return None
    m, k = ashape[-2], ashape[-1]
    n = bshape[-1]
    la, lb, lo = _lead(m, k, sa[-2], sa[-1]), _lead(k, n, sb[-2], sb[-1]), _lead(m, n, so[-2], so[-1])
    if la is None or lb is None or lo is None or lo[0]:
        return None
    batch = oshape[:-2]
    outer, inner = 1, 1
    bs: list[tuple[int, ...]] = [(0, 0, 0), (0, 0, 0)]  # strides of the (outer, inner) batch dims, merged
    if batch:
        cols = (_batch_strides(batch, ashape, sa), _batch_strides(batch, bshape, sb), list(so[:-2]))
        dims: list[tuple[int, tuple[int, ...]]] = []
        for d, size in enumerate(batch):
            if size == 1:
                continue
            st = (cols[0][d], cols[1][d], cols[2][d])
            if dims and all(p == q * size for p, q in zip(dims[-1][1], st)):
                dims[-1] = (dims[-1][0] * size, st)
            else:
                dims.append((size, st))
        if len(dims) > 2:
            return None
        if len(dims) == 2:
            (outer, bs[0]), (inner, bs[1]) = dims
        elif dims:
            inner, bs[1] = dims[0]
    return (int(dtype == _FLOATS[1]), outer, inner, m, n, k, bs[0][0], bs[1][0], la[1], la[0],
            bs[0][1], bs[1][1], lb[1], lb[0], bs[0][2], bs[1][2], lo[1])


def _as_matrix(arg: TensorArg, vector_dim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, strides) with a 1-D operand made a matrix: a row (vector_dim -2) or a column (-1)."""
    if len(arg.shape) >= 2:
        return arg.shape, arg.strides
    (n,), (s,) = arg.shape, arg.strides
    return ((1, n), (0, s)) if vector_dim == -2 else ((n, 1), (s, 0))


def _batch_offsets(batch: tuple[int, ...], *operands: tuple[tuple[int, ...], tuple[int, ...], int]) -> Any:
    """int64[batch entries, len(operands)]: each entry's element offset into each operand (full shape and
    strides, matrix dims last), whose batch dims broadcast against `batch`."""
    cols = []
    for shape, strides, base in operands:
        bstr = _batch_strides(batch, shape, strides)
        off = np.full((), base, np.int64)
        for size, st in zip(batch, bstr):
            off = np.add.outer(off, np.arange(size, dtype=np.int64) * st)
        cols.append(off.reshape(-1))
    return np.ascontiguousarray(np.stack(cols, axis=1))


def _half_matmul(o: TensorArg, a: TensorArg, b: TensorArg) -> None:
    """float16/bfloat16 matmul (csrc/gemm_half.c): any strides, 1-D operands and broadcast batch dims."""
    ashape, astr = _as_matrix(a, -2)
    bshape, bstr = _as_matrix(b, -1)
    oshape, ostr = list(o.shape), list(o.strides)  # a 1-D operand's dim is absent from the output
    if len(b.shape) == 1:
        oshape, ostr = [*oshape, 1], [*ostr, 0]
    if len(a.shape) == 1:
        oshape.insert(len(oshape) - 1, 1)
        ostr.insert(len(ostr) - 1, 0)
    m, k, n = ashape[-2], ashape[-1], bshape[-1]
    batch = tuple(oshape[:-2])
    target = o
    if o.buffer is a.buffer or o.buffer is b.buffer:  # tiles are stored while later ones still read
        target = TensorArg(np.empty(max(o.numel, 1), o.buffer.dtype), o.shape, contiguous_strides(o.shape), 0,
                           o.dtype)
        ostr = list(contiguous_strides(tuple(oshape)))
    offsets = _batch_offsets(batch, (ashape, astr, a.offset), (bshape, bstr, b.offset),
                             (tuple(oshape), tuple(ostr), target.offset))
    u16 = _U16
    done = lib.rumus_gemm_half(int(o.dtype.name == "bfloat16"), offsets.shape[0], _from_buffer("int64_t[]", offsets),
                               m, n, k, u16(_from_buffer(a.buffer)), astr[-2], astr[-1],
                               u16(_from_buffer(b.buffer)), bstr[-2], bstr[-1],
                               u16(_from_buffer(target.buffer)), ostr[-2], ostr[-1])
    if not done:
        raise MemoryError(f"matmul: no memory for the float32 tiles of a {o.dtype} product")
    if target is not o:
        view(o)[...] = view(target)


def linear(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """x [..., in] @ weight[out, in].T + bias [out] (all contiguous: the schema says so) as one blocked GEMM
    with the bias added in each block's epilogue, while the block is in cache (csrc/gemm_blocked.c). The
    same BLAS calls and then the same single additions as matmul followed by add: bit-identical to the
    unfused path, at every thread count."""
    o, (x, w, b) = outputs[0], inputs
    if o.numel == 0:
        return
    n_out, k = w.shape
    m = o.numel // n_out
    isz = o.buffer.itemsize
    if k and lib.rumus_gemm_bias(int(o.buffer.dtype == _FLOATS[1]), 1, 1, m, n_out, k,
                                 (x.native or _ptr(x)) + x.offset * isz, 0, 0, k, 0,
                                 (w.native or _ptr(w)) + w.offset * isz, 0, 0, k, 1,
                                 (o.native or _ptr(o)) + o.offset * isz, 0, 0, n_out,
                                 (b.native or _ptr(b)) + b.offset * isz):
        return
    ov = view(o).reshape(m, n_out)
    if k == 0:  # no features: every product is an empty sum
        ov[...] = view(b)
        return
    # BLAS not attached, or sizes past its 32-bit ints: numpy's matmul with BLAS on one thread, then the bias
    gemm(view(x).reshape(m, k), view(w).T, ov)
    ov += view(b)


def linear_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """grad @ weight, grad.T @ x and grad's column sums: the same two GEMM calls and the same sum kernel as the
    composite's three ops (bit-identical), without two dispatches and two views between them. Any strides
    (an expanded gradient, a sliced input): the GEMM and the sum take them as matmul and sum do."""
    (gx, gw, gb), (g, x, w) = outputs, inputs
    rows, n_out = g.shape
    matmul([gx], [g, w], attrs)
    matmul([gw], [TensorArg(g.buffer, (n_out, rows), g.strides[::-1], g.offset, g.dtype), x], attrs)
    _column_sum([TensorArg(gb.buffer, (1, n_out), (n_out, 1), gb.offset, gb.dtype)], [g], _DIMS0)


def _U16(ptr: Any) -> Any:
    return ffi.cast("uint16_t *", ptr)


# linear: float32/float64 only; on float16/bfloat16 its composite (matmul, then add) runs
_column_sum = reduction("sum", FLOAT)
_DIMS0 = {"dims": (0,)}

KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [("matmul", matmul, (*FLOAT, *HALF)), ("linear", linear, FLOAT),
                                                        ("linear_backward", linear_backward, FLOAT)]
