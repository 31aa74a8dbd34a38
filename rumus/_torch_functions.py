"""More of torch's functions, written once with core ops (so every backend runs them and autograd flows
through the ops they call). Each follows torch's semantics for its arguments and result dtype; the same
calls are compared with torch in tests/compat/test_torch_functions.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, RumusError, ShapeError, bool_, float32, int64
from rumus_contracts.shapes import broadcast_shapes, normalize_dim

from . import _creation
from . import _math as M
from . import _views as V
from ._torch_dtype_info import LEGACY, finfo, iinfo, set_default_dtype
from .ops import get as _op
from .tensor import Tensor

LN10, LN2 = math.log(10.0), math.log(2.0)


def _nd(dim: int, ndim: int) -> int:
    return normalize_dim("dim", dim, ndim)


def _strided_view(x: Tensor, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, name: str) -> Tensor:
    """A view of x with this layout, differentiable: its gradient is summed back into x's positions."""
    from ._inplace import _view_of_base_back, view_positions
    from ._tensor_base import make_tensor
    positions = view_positions(make_tensor(x._storage, shape, strides, offset), x)
    return V._view(x, shape, strides, offset, name, _view_of_base_back, {"positions": positions})


def _float(x: Tensor) -> Tensor:
    return x if x.dtype.is_floating else x.to(float32)


# ---- elementwise --------------------------------------------------------------------------------------
def erf(x: Tensor) -> Tensor:
    return _op("erf")(_float(x))


def tan(x: Tensor) -> Tensor:
    x = _float(x)
    return M.div(M.sin(x), M.cos(x))


def atan(x: Tensor) -> Tensor:
    x = _float(x)
    return M.atan2(x, M._t(1.0, x))


def asin(x: Tensor) -> Tensor:
    x = _float(x)
    # outside [-1, 1] sqrt gives NaN, as asin does there
    return M.atan2(x, M.sqrt(M.sub(1.0, M.mul(x, x))))


def acos(x: Tensor) -> Tensor:
    x = _float(x)
    return M.atan2(M.sqrt(M.sub(1.0, M.mul(x, x))), x)


def sinh(x: Tensor) -> Tensor:
    x = _float(x)
    # expm1 keeps small arguments exact (exp(x) - exp(-x) cancels to 0 in float32 near 0)
    return M.mul(M.sub(M.expm1(x), M.expm1(M.neg(x))), 0.5)


def cosh(x: Tensor) -> Tensor:
    x = _float(x)
    return M.mul(M.add(M.exp(x), M.exp(M.neg(x))), 0.5)


def log10(x: Tensor) -> Tensor:
    return M.div(M.log(_float(x)), LN10)


def log2(x: Tensor) -> Tensor:
    return M.div(M.log(_float(x)), LN2)


def deg2rad(x: Tensor) -> Tensor:
    return M.mul(_float(x), math.pi / 180.0)


def rad2deg(x: Tensor) -> Tensor:
    return M.mul(_float(x), 180.0 / math.pi)


def frac(x: Tensor) -> Tensor:
    return M.sub(x, M.trunc(x))


def hypot(a: Tensor, b: Tensor) -> Tensor:
    return M.sqrt(M.add(M.mul(a, a), M.mul(b, b)))


def xlogy(x: Tensor, y: Any) -> Tensor:
    """x * log(y), 0 where x is 0 (NaN where y is NaN), as torch.xlogy; like torch's, the gradient for x
    is log(y) even where x is 0 (finite there: 0 where y is 0 too)."""
    x = _float(x)
    y = M._t(y, x) if not isinstance(y, Tensor) else _float(y)
    log_y = M.log(y)
    at_zero = M.logical_and(M.eq(x, 0.0), M.logical_not(M.isnan(y)))
    safe = M.where(at_zero, M._t(0.0, log_y), log_y)
    # adds log(y) to x's gradient where x is 0, and nothing to the value: (x - x.detach()) is 0 there
    extra = M.where(M.logical_and(at_zero, M.isfinite(log_y)), log_y, M._t(0.0, log_y)).detach()
    return M.add(M.mul(x, safe), M.mul(M.sub(x, x.detach()), extra))


def maximum(a: Tensor, b: Tensor) -> Tensor:
    """The elementwise larger of a and b (NaN if either is NaN); two bool tensors give their "or", as bool."""
    if a.dtype == bool_ and b.dtype == bool_:  # bool stays bool (torch): the larger of two bools is "or"
        return M.logical_or(a, b)
    return M.maximum(a, b)


def minimum(a: Tensor, b: Tensor) -> Tensor:
    """The elementwise smaller of a and b (NaN if either is NaN); two bool tensors give their "and", as bool."""
    if a.dtype == bool_ and b.dtype == bool_:
        return M.logical_and(a, b)
    return M.minimum(a, b)


def clamp_min(x: Tensor, min: Any) -> Tensor:
    return M.clamp(x, min=min)


def clamp_max(x: Tensor, max: Any) -> Tensor:
    return M.clamp(x, max=max)


def lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    return M.add(start, M.mul(weight, M.sub(end, start)))


def addcmul(x: Tensor, t1: Tensor, t2: Tensor, *, value: float = 1.0) -> Tensor:
    return M.add(x, M.mul(M.mul(t1, t2), value))


def addcdiv(x: Tensor, t1: Tensor, t2: Tensor, *, value: float = 1.0) -> Tensor:
    return M.add(x, M.mul(M.div(t1, t2), value))


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    if not x.dtype.is_floating:
        return M.clone(x)
    info = np.finfo(np.float32 if x.dtype == float32 else np.float64 if x.dtype.name == "float64" else np.float16)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = M.where(M.isnan(x), M._t(float(nan), x), x)
    out = M.where(M.eq(out, math.inf), M._t(hi, x), out)
    return M.where(M.eq(out, -math.inf), M._t(lo, x), out)


# ---- matrices -----------------------------------------------------------------------------------------
def addmm(x: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    prod = M.mm(mat1, mat2)
    return M.add(M.mul(x, beta) if beta != 1 else x, M.mul(prod, alpha) if alpha != 1 else prod)


def baddbmm(x: Tensor, b1: Tensor, b2: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    prod = M.bmm(b1, b2)
    return M.add(M.mul(x, beta) if beta != 1 else x, M.mul(prod, alpha) if alpha != 1 else prod)


def t(x: Tensor) -> Tensor:
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x if x.ndim < 2 else V.transpose(x, 0, 1)


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal as a view (torch's: the last dim of the result runs along it)."""
    d1, d2 = _nd(dim1, x.ndim), _nd(dim2, x.ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x.shape[d1], x.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = (0 if offset >= 0 else -offset) * x._strides[d1] + (offset if offset >= 0 else 0) * x._strides[d2]
    keep = [i for i in range(x.ndim) if i not in (d1, d2)]
    shape = tuple(x.shape[i] for i in keep) + (length,)
    strides = tuple(x._strides[i] for i in keep) + (x._strides[d1] + x._strides[d2],)
    return _strided_view(x, shape, strides, x._offset + (start if length else 0), "diagonal")


def diag(x: Tensor, diagonal_: int = 0, **kw: Any) -> Tensor:
    """1-D: a square matrix with x on diagonal `diagonal`; 2-D: that diagonal, as a new tensor."""
    k = int(kw.pop("diagonal", diagonal_))
    if kw:
        raise TypeError(f"diag() got an unexpected keyword argument {next(iter(kw))!r}")
    if x.ndim == 2:
        return M.clone(diagonal(x, k))
    if x.ndim != 1:
        raise ShapeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    n = x.shape[0] + abs(k)
    out = _creation.zeros(n, n, dtype=x.dtype, device=x.device)
    if x.shape[0] == 0:
        return out
    rows = _creation.arange(x.shape[0], device=x.device) + (0 if k >= 0 else -k)
    flat = M.add(M.mul(rows, n), M.add(rows, k))
    from ._indexing import index_add
    return index_add(V.reshape(out, (n * n,)), 0, flat, x).reshape(n, n)


def diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    if (dim1, dim2) != (-2, -1) or offset != 0:
        raise RumusError("diag_embed: only offset=0, dim1=-2, dim2=-1 are supported; build other layouts with "
                         "permute")
    n = x.shape[-1]
    return M.mul(V.unsqueeze(x, -1), _creation.eye(n, dtype=x.dtype, device=x.device))


def trace(x: Tensor) -> Tensor:
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return M.sum(diagonal(x))


def kron(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError("kron: only 2-D inputs are supported")
    (m, n), (p, q) = a.shape, b.shape
    out = M.mul(V.reshape(a, (m, 1, n, 1)), V.reshape(b, (1, p, 1, q)))
    return V.reshape(out, (m * p, n * q))


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    r, c = np.tril_indices(row, offset, col)
    return _creation.tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or int64, device=device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    r, c = np.triu_indices(row, offset, col)
    return _creation.tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or int64, device=device)


def cross(a: Tensor, b: Tensor, dim: int | None = None) -> Tensor:
    d = -1 if dim is None else dim
    if a.shape[d] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {d} must have length 3. Got {a.shape[d]}")
    a0, a1, a2 = V.split(a, 1, d)
    b0, b1, b2 = V.split(b, 1, d)
    return M.cat([M.sub(M.mul(a1, b2), M.mul(a2, b1)), M.sub(M.mul(a2, b0), M.mul(a0, b2)),
                  M.sub(M.mul(a0, b1), M.mul(a1, b0))], d)


def dist(a: Tensor, b: Tensor, p: float = 2.0) -> Tensor:
    from ._composites_torch import norm
    return norm(M.sub(a, b), p)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0) -> Tensor:
    """Pairwise p-norm distances between the rows of x1 [.., P, M] and x2 [.., R, M] -> [.., P, R]."""
    diff = M.sub(V.unsqueeze(x1, -2), V.unsqueeze(x2, -3))
    if p == 2.0:
        return M.sqrt(M.sum(M.mul(diff, diff), -1))
    if p == 1.0:
        return M.sum(M.abs(diff), -1)
    if math.isinf(p):
        return M.amax(M.abs(diff), -1)
    return M.pow(M.sum(M.pow(M.abs(diff), p), -1), 1.0 / p)


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    if isinstance(dims, int):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da = [_nd(d, a.ndim) for d in da]
    db = [_nd(d, b.ndim) for d in db]
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [i for i in range(b.ndim) if i not in db]
    k = int(np.prod([a.shape[i] for i in da])) if da else 1
    am = V.reshape(V.permute(a, tuple(free_a + da)), (-1, k))
    bm = V.reshape(V.permute(b, tuple(db + free_b)), (k, -1))
    return V.reshape(M.mm(am, bm), tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


# ---- shapes -------------------------------------------------------------------------------------------
def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    d = _nd(dim, x.ndim)
    return tuple(V.select(x, d, i) for i in range(x.shape[d]))


def atleast_1d(x: Tensor) -> Tensor:
    return V.reshape(x, (1,)) if x.ndim == 0 else x


def atleast_2d(x: Tensor) -> Tensor:
    return V.reshape(x, (1, 1)) if x.ndim == 0 else V.unsqueeze(x, 0) if x.ndim == 1 else x


def atleast_3d(x: Tensor) -> Tensor:
    if x.ndim == 0:
        return V.reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return V.reshape(x, (1, x.shape[0], 1))
    return V.unsqueeze(x, -1) if x.ndim == 2 else x


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    ts = [atleast_1d(t) for t in tensors]
    return M.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    return M.cat([atleast_2d(t) for t in tensors], 0)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    return M.cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    return M.cat([V.reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors], 1)


def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
    return V.expand(x, tuple(shape))


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    shape = broadcast_shapes("broadcast_tensors", *(t.shape for t in tensors))
    return tuple(V.expand(t, shape) for t in tensors)


def broadcast_shapes_(*shapes: Sequence[int]) -> tuple[int, ...]:
    return tuple(broadcast_shapes("broadcast_shapes", *(tuple(s) if not isinstance(s, int) else (s,)
                                                          for s in shapes)))


def movedim(x: Tensor, source: Any, destination: Any) -> Tensor:
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the "
                         f"same number of dims as destination ({dst} dims)")
    src = [_nd(d, x.ndim) for d in src]
    dst = [_nd(d, x.ndim) for d in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return V.permute(x, tuple(order))


def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    return V.transpose(x, axis0, axis1)


def tile(x: Tensor, *dims: Any) -> Tensor:
    from ._composites_torch import repeat
    reps = tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int) else tuple(int(d) for d in dims)
    if len(reps) < x.ndim:
        reps = (1,) * (x.ndim - len(reps)) + reps
    return repeat(x, reps)


def rot90(x: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    from ._composites_torch import flip
    d0, d1 = (_nd(d, x.ndim) for d in dims)
    k %= 4
    if k == 1:
        return V.transpose(flip(x, [d1]), d0, d1)
    if k == 2:
        return flip(x, [d0, d1])
    if k == 3:
        return flip(V.transpose(x, d0, d1), [d1])
    return M.clone(x)


def diff(x: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None) -> Tensor:
    d = _nd(dim, x.ndim)
    if prepend is not None or append is not None:
        x = M.cat([t for t in (prepend, x, append) if t is not None], d)
    for _ in range(n):
        size = x.shape[d]
        hi, lo = V.narrow(x, d, 1, max(size - 1, 0)), V.narrow(x, d, 0, max(size - 1, 0))
        x = M.logical_xor(hi, lo) if x.dtype == bool_ else M.sub(hi, lo)
    return x


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    nz = M.ne(x, M._t(0, x)).to(int64)
    return M.sum(nz) if dim is None else M.sum(nz, dim)


def nansum(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    clean = M.where(M.isnan(x), M._t(0.0, x), x)
    return M.sum(clean, dim, keepdim)


def nanmean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    ok = M.logical_not(M.isnan(x))
    return M.div(nansum(x, dim, keepdim), M.sum(ok.to(x.dtype), dim, keepdim))


def var_mean(x: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: int | None = None) -> tuple[Tensor, Tensor]:
    c = correction if correction is not None else (0 if unbiased is False else 1)
    return M.var(x, dim, correction=c, keepdim=keepdim), M.mean(x, dim, keepdim=keepdim)


def std_mean(x: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: int | None = None) -> tuple[Tensor, Tensor]:
    c = correction if correction is not None else (0 if unbiased is False else 1)
    return M.std(x, dim, correction=c, keepdim=keepdim), M.mean(x, dim, keepdim=keepdim)


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype: Any = None,
             device: Any = None) -> Tensor:
    exps = np.linspace(start, end, int(steps))
    return _creation.tensor(np.power(base, exps), dtype=dtype or float32, device=device)


def block_diag(*tensors: Tensor) -> Tensor:
    mats = [V.reshape(t, (1, -1)) if t.ndim < 2 else t for t in tensors]
    if any(m.ndim != 2 for m in mats):
        raise ShapeError("block_diag: Input tensors must have 2 or fewer dimensions")
    rows = sum(m.shape[0] for m in mats)
    cols = sum(m.shape[1] for m in mats)
    parts, c = [], 0
    for m in mats:
        from .nn.functional_torch import pad
        parts.append(pad(m, (c, cols - c - m.shape[1]), "constant", 0.0))
        c += m.shape[1]
    out = M.cat(parts, 0) if parts else _creation.zeros(rows, cols)
    return out


def cartesian_prod(*tensors: Tensor) -> Tensor:
    from ._composites_torch import meshgrid
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return M.stack([V.reshape(g, (-1,)) for g in grids], 1)


FUNCTIONS: dict[str, Any] = {
    "erf": erf, "tan": tan, "atan": atan, "asin": asin, "acos": acos, "arctan": atan, "arcsin": asin,
    "arccos": acos, "sinh": sinh, "cosh": cosh, "log10": log10, "log2": log2, "deg2rad": deg2rad,
    "rad2deg": rad2deg, "frac": frac, "hypot": hypot, "xlogy": xlogy, "clamp_min": clamp_min,
    "clamp_max": clamp_max, "maximum": maximum, "minimum": minimum, "lerp": lerp, "addcmul": addcmul,
    "addcdiv": addcdiv, "nan_to_num": nan_to_num,
    "addmm": addmm, "baddbmm": baddbmm, "t": t, "diagonal": diagonal, "diag": diag, "diag_embed": diag_embed,
    "trace": trace, "kron": kron, "tril_indices": tril_indices, "triu_indices": triu_indices, "cross": cross,
    "dist": dist, "cdist": cdist, "tensordot": tensordot, "unbind": unbind, "atleast_1d": atleast_1d,
    "atleast_2d": atleast_2d, "atleast_3d": atleast_3d, "hstack": hstack, "vstack": vstack, "dstack": dstack,
    "column_stack": column_stack, "broadcast_to": broadcast_to, "broadcast_tensors": broadcast_tensors,
    "broadcast_shapes": broadcast_shapes_, "movedim": movedim, "moveaxis": movedim, "swapaxes": swapaxes,
    "swapdims": swapaxes, "tile": tile, "rot90": rot90, "diff": diff, "count_nonzero": count_nonzero,
    "nansum": nansum, "nanmean": nanmean, "var_mean": var_mean, "std_mean": std_mean, "logspace": logspace,
    "block_diag": block_diag, "cartesian_prod": cartesian_prod, "finfo": finfo, "iinfo": iinfo,
    "set_default_dtype": set_default_dtype, "dtype": DType, **LEGACY,
}
