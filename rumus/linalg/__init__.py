"""torch.linalg: norms, solve, inv, det, slogdet, cholesky, qr, svd, eigh, lstsq, pinv, ... with autograd.

Decompositions and solves run in LAPACK through numpy on the host (in the input's dtype, batched over
leading dims, as torch's do), then land on the input's device. Their gradients are torch's formulas,
evaluated the same way, so a loss through `det`, `inv`, `cholesky`, `qr`, `svd` or `eigh` trains as it
does under torch (first derivatives; a backward through these backwards is not supported). Norms are
written with core ops, so they run on every backend and differentiate twice."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rumus_contracts import RumusError, ShapeError

from .. import _creation
from .. import _math as M
from .. import _views as V
from .._composites_torch import norm as _core_norm
from .._torch_functions import cross as _cross
from ..autograd.function import Function, FunctionCtx
from ..tensor import Tensor

__all__ = [
    "cholesky", "cond", "cross", "det", "eigh", "eigvalsh", "inv", "lstsq", "matrix_norm", "matrix_power",
    "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "vecdot", "vector_norm",
]


class LinAlgError(RumusError, RuntimeError):
    """A matrix that the decomposition cannot take (singular, not positive-definite); torch raises
    torch.linalg.LinAlgError, a RuntimeError, in the same places."""


def _host(t: Tensor) -> np.ndarray:
    return t.detach().numpy()


def _like(values: np.ndarray, ref: Tensor) -> Tensor:
    return _creation.tensor(np.ascontiguousarray(values), dtype=ref.dtype, device=ref.device)


def _square(name: str, a: Tensor) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                         f"{a.shape[-2] if a.ndim >= 2 else '?'} by {a.shape[-1] if a.ndim else '?'} matrices")
    if not a.dtype.is_floating:
        raise ShapeError(f"linalg.{name}: Expected a floating point tensor as input. Got {a.dtype}")


def _T(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def _lapack(name: str, fn: Any, *args: Any) -> Any:
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except np.linalg.LinAlgError as exc:
        raise LinAlgError(f"linalg.{name}: {exc}") from None


# ---- inverse, determinant, solve -------------------------------------------------------------------
class _Inv(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:
        inv_a = _lapack("inv", np.linalg.inv, _host(a))
        if not np.all(np.isfinite(inv_a)):
            raise LinAlgError("linalg.inv: The diagonal element of the LU factorisation is zero: the matrix is "
                              "singular")
        ctx.inv = inv_a  # type: ignore[attr-defined]
        return _like(inv_a, a)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:
        inv_t = _T(ctx.inv)  # type: ignore[attr-defined]
        return _like(-inv_t @ _host(g) @ inv_t, g)


def inv(A: Tensor) -> Tensor:
    _square("inv", A)
    return _Inv.apply(A)  # type: ignore[no-any-return]


class _Det(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:
        host = _host(a)
        d = _lapack("det", np.linalg.det, host)
        ctx.a, ctx.det = host, d  # type: ignore[attr-defined]
        return _like(np.asarray(d), a)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:
        a, d = ctx.a, ctx.det  # type: ignore[attr-defined]
        # d det / dA = det * A^{-T}; through the adjugate where A is singular (det 0), as torch does
        u, s, vh = np.linalg.svd(a)
        sign = np.linalg.det(u) * np.linalg.det(vh)
        k = s.shape[-1]
        prods = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(k)], -1)
        adj_t = (u * (prods * sign[..., None])[..., None, :]) @ vh  # cofactor matrix
        return _like(_host(g).reshape(np.shape(d))[..., None, None] * adj_t, g)


def det(A: Tensor) -> Tensor:
    _square("det", A)
    return _Det.apply(A)  # type: ignore[no-any-return]


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class _Logabsdet(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:
        host = _host(a)
        _, logabs = _lapack("slogdet", np.linalg.slogdet, host)
        ctx.a = host  # type: ignore[attr-defined]
        return _like(np.asarray(logabs), a)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:
        inv_t = _T(_lapack("slogdet", np.linalg.inv, ctx.a))  # type: ignore[attr-defined]
        return _like(_host(g).reshape(inv_t.shape[:-2])[..., None, None] * inv_t, g)


def slogdet(A: Tensor) -> SlogdetResult:
    _square("slogdet", A)
    sign, _ = np.linalg.slogdet(_host(A))
    return SlogdetResult(_like(np.asarray(sign), A), _Logabsdet.apply(A))


class _Solve(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor, b: Tensor) -> Tensor:
        ha, hb = _host(a), _host(b)
        x = _lapack("solve", np.linalg.solve, ha, hb)
        ctx.a, ctx.x = ha, x  # type: ignore[attr-defined]
        return _like(x, b)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> tuple[Tensor, Tensor]:
        a, x = ctx.a, ctx.x  # type: ignore[attr-defined]
        gb = np.linalg.solve(_T(a), _host(g))
        ga = -gb @ _T(x)
        return _like(_sum_to(ga, a.shape), g), _like(gb, g)


def _sum_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    while x.ndim > len(shape):
        x = x.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and x.shape[i] != 1:
            x = x.sum(i, keepdims=True)
    return x


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with A X = B (left) or X A = B (left=False); B may be a vector (torch's rule: B.ndim == 1, or
    B's shape is A's batch shape plus one dim)."""
    _square("solve", A)
    if not left:
        return V.matrix_transpose(solve(V.matrix_transpose(A), V.matrix_transpose(B)))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector:
        return _Solve.apply(A, B.unsqueeze(-1)).squeeze(-1)  # type: ignore[no-any-return]
    if B.shape[-2] != A.shape[-1]:
        raise ShapeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                         f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    batch = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    a = A.expand(*batch, *A.shape[-2:]) if tuple(A.shape[:-2]) != batch else A
    b = B.expand(*batch, *B.shape[-2:]) if tuple(B.shape[:-2]) != batch else B
    return _Solve.apply(a, b)  # type: ignore[no-any-return]


def matrix_power(A: Tensor, n: int) -> Tensor:
    _square("matrix_power", A)
    if n < 0:
        return matrix_power(inv(A), -n)
    out = _creation.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape)
    base, k = A, n
    while k:
        if k & 1:
            out = M.matmul(out, base)
        k >>= 1
        if k:
            base = M.matmul(base, base)
    return out


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    if len(tensors) < 2:
        raise ShapeError("multi_dot(): expected at least 2 tensors but got " + str(len(tensors)))
    out = tensors[0]
    for t in tensors[1:]:
        out = M.matmul(out, t)
    return out


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    return M.sum(M.mul(x, y), dim)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    return _cross(input, other, dim)


# ---- decompositions ----------------------------------------------------------------------------------
class _Cholesky(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:
        try:
            low = np.linalg.cholesky(_host(a))
        except np.linalg.LinAlgError:
            raise LinAlgError("linalg.cholesky: The factorization could not be completed because the input is not "
                              "positive-definite") from None
        ctx.low = low  # type: ignore[attr-defined]
        return _like(low, a)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:
        low, gl = ctx.low, _host(g)  # type: ignore[attr-defined]
        # torch's formula: gA = L^{-H} Phi(L^H gL) L^{-1}, symmetrised; Phi keeps the lower part, half diagonal
        phi = np.tril(_T(low) @ gl)
        phi[..., np.arange(phi.shape[-1]), np.arange(phi.shape[-1])] *= 0.5
        linv = np.linalg.inv(low)
        ga = _T(linv) @ phi @ linv
        return _like(0.5 * (ga + _T(ga)), g)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    _square("cholesky", A)
    low = _Cholesky.apply(A)
    return V.matrix_transpose(low) if upper else low


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class _QR(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> tuple[Tensor, Tensor]:
        q, r = np.linalg.qr(_host(a), mode="reduced")
        ctx.q, ctx.r = q, r  # type: ignore[attr-defined]
        return _like(q, a), _like(r, a)

    @staticmethod
    def backward(ctx: FunctionCtx, gq: Tensor | None, gr: Tensor | None) -> Tensor:
        q, r = ctx.q, ctx.r  # type: ignore[attr-defined]
        m, n = q.shape[-2], r.shape[-1]
        if m < n:
            raise LinAlgError("linalg.qr: the derivative of QR is not implemented when rows < columns")
        gqh = np.zeros_like(q) if gq is None else _host(gq)
        grh = np.zeros_like(r) if gr is None else _host(gr)
        mm = r @ _T(grh) - _T(gqh) @ q
        low = np.tril(mm, -1)
        copyltu = low + _T(low) + mm * np.eye(mm.shape[-1])
        b = gqh + q @ copyltu
        ga = _T(np.linalg.solve(r, _T(b)))  # b R^{-T}
        return _like(ga, gq if gq is not None else gr)  # type: ignore[arg-type]


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"linalg.qr: qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                         f"(default), 'r', or 'complete'")
    if mode == "complete" and A.shape[-2] > A.shape[-1]:
        q, r = np.linalg.qr(_host(A), mode="complete")
        return QRResult(_like(q, A), _like(r, A))
    q_t, r_t = _QR.apply(A)
    if mode == "r":
        return QRResult(_creation.empty(0, dtype=A.dtype, device=A.device), r_t)
    return QRResult(q_t, r_t)


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class _SVD(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        u, s, vh = _lapack("svd", np.linalg.svd, _host(a), False)
        ctx.u, ctx.s, ctx.vh = u, s, vh  # type: ignore[attr-defined]
        return _like(u, a), _like(s, a), _like(vh, a)

    @staticmethod
    def backward(ctx: FunctionCtx, gu_t: Tensor | None, gs_t: Tensor | None, gvh_t: Tensor | None) -> Tensor:
        u, s, vh = ctx.u, ctx.s, ctx.vh  # type: ignore[attr-defined]
        ref = next(t for t in (gu_t, gs_t, gvh_t) if t is not None)
        m, n = u.shape[-2], vh.shape[-1]
        gs = None if gs_t is None else _host(gs_t)
        if gu_t is None and gvh_t is None:
            return _like((u * gs[..., None, :]) @ vh, ref)  # type: ignore[index]
        v = _T(vh)
        gu = None if gu_t is None else _host(gu_t)
        gv = None if gvh_t is None else _T(_host(gvh_t))
        s2 = s * s
        e = s2[..., None, :] - s2[..., :, None]
        idx = np.arange(s.shape[-1])
        e[..., idx, idx] = 1.0
        ret = np.zeros(e.shape)
        if gu is not None:
            uhgu = _T(u) @ gu
            ret = ret + ((uhgu - _T(uhgu)) / e) * s[..., None, :]
        if gv is not None:
            vhgv = _T(v) @ gv
            ret = ret + s[..., :, None] * ((vhgv - _T(vhgv)) / e)
        if gs is not None:
            ret = ret + gs[..., :, None] * np.eye(s.shape[-1])
        if m > n and gu is not None:
            ga = u @ ret
            gusinv = gu / s[..., None, :]
            ga = (ga + gusinv - u @ (_T(u) @ gusinv)) @ vh
        elif m < n and gv is not None:
            ga = ret @ vh
            gvsinv = gv / s[..., None, :]
            ga = u @ (ga + _T(gvsinv) - (_T(gvsinv) @ v) @ vh)
        else:
            ga = u @ ret @ vh
        return _like(ga, ref)


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:
    """U, S, Vh; the gradient needs full_matrices=False when U or Vh are used (torch's rule)."""
    if full_matrices and min(A.shape[-2:]) != max(A.shape[-2:]):
        u, s, vh = np.linalg.svd(_host(A), full_matrices=True)
        if A.requires_grad:
            raise RumusError("linalg.svd: full_matrices=True is not differentiable for non-square A (torch: "
                             "'Setting full_matrices=True in forward is not supported in backward'); pass "
                             "full_matrices=False")
        return SVDResult(_like(u, A), _like(s, A), _like(vh, A))
    return SVDResult(*_SVD.apply(A))


def svdvals(A: Tensor) -> Tensor:
    return svd(A, full_matrices=False).S


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class _Eigh(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor, uplo: str) -> tuple[Tensor, Tensor]:
        w, q = _lapack("eigh", np.linalg.eigh, _host(a), uplo)
        ctx.w, ctx.q = w, q  # type: ignore[attr-defined]
        return _like(w, a), _like(q, a)

    @staticmethod
    def backward(ctx: FunctionCtx, gw_t: Tensor | None, gq_t: Tensor | None) -> tuple[Tensor, None]:
        w, q = ctx.w, ctx.q  # type: ignore[attr-defined]
        ref = gw_t if gw_t is not None else gq_t
        inner = np.zeros(q.shape[:-2] + (w.shape[-1], w.shape[-1]))
        if gq_t is not None:
            e = w[..., None, :] - w[..., :, None]
            idx = np.arange(w.shape[-1])
            e[..., idx, idx] = np.inf  # the diagonal term of Q^T gQ does not enter
            inner = inner + (_T(q) @ _host(gq_t)) / e
        if gw_t is not None:
            inner = inner + _host(gw_t)[..., :, None] * np.eye(w.shape[-1])
        return _like(q @ inner @ _T(q), ref), None  # type: ignore[arg-type]


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    _square("eigh", A)
    if UPLO not in ("L", "U"):
        raise ShapeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return EighResult(*_Eigh.apply(A, UPLO))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    return eigh(A, UPLO).eigenvalues


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


class _Lstsq(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor, b: Tensor) -> Tensor:
        ha, hb = _host(a), _host(b)
        x = np.linalg.pinv(ha) @ hb
        ctx.a, ctx.b, ctx.x = ha, hb, x  # type: ignore[attr-defined]
        return _like(x, b)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b, x = ctx.a, ctx.b, ctx.x  # type: ignore[attr-defined]
        c = np.linalg.pinv(_T(a) @ a) @ _host(g)
        residual = b - a @ x
        return _like(residual @ _T(c) - a @ c @ _T(x), g), _like(a @ c, g)


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> LstsqResult:
    """The least-squares solution of A X = B (A of full column rank for the gradient). As torch's default
    CPU driver (gelsy), residuals and singular_values come back empty; rank is A's rank."""
    if A.ndim < 2:
        raise ShapeError(f"linalg.lstsq: input must have at least 2 dimensions, got {A.ndim}")
    vector = B.ndim == A.ndim - 1
    sol = _Lstsq.apply(A, B.unsqueeze(-1) if vector else B)
    rank = np.linalg.matrix_rank(_host(A))
    empty = _creation.empty(0, dtype=A.dtype, device=A.device)
    return LstsqResult(sol.squeeze(-1) if vector else sol, empty,
                       _creation.tensor(np.asarray(rank, np.int64), device=A.device), empty)


def pinv(A: Tensor, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False) -> Tensor:
    """Moore-Penrose pseudo-inverse through the SVD (so it differentiates where A's rank is stable)."""
    u, s, vh = svd(A, full_matrices=False)
    eps = float(np.finfo(np.float32 if A.dtype.name == "float32" else np.float64).eps)
    tol = (rtol if rtol is not None else max(A.shape[-2:]) * eps) * M.amax(s, -1, keepdim=True)
    if atol is not None:
        tol = M.maximum(tol, M._t(float(atol), tol))
    keep = M.gt(s, tol)
    s_inv = M.where(keep, M.reciprocal(M.where(keep, s, M._t(1.0, s))), M._t(0.0, s))
    return M.matmul(M.mul(V.matrix_transpose(vh), s_inv.unsqueeze(-2)), V.matrix_transpose(u))


def matrix_rank(A: Tensor, *, atol: float | None = None, rtol: float | None = None,
                hermitian: bool = False) -> Tensor:
    s = np.linalg.svd(_host(A), compute_uv=False)
    eps = float(np.finfo(s.dtype).eps)
    tol = (rtol if rtol is not None else max(A.shape[-2:]) * eps) * s.max(-1, keepdims=True)
    if atol is not None:
        tol = np.maximum(tol, atol)
    return _creation.tensor((s > tol).sum(-1).astype(np.int64), device=A.device)


# ---- norms --------------------------------------------------------------------------------------------
def vector_norm(x: Tensor, ord: float = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    dims = None if dim is None else (dim if isinstance(dim, int) else tuple(dim))
    if ord == math.inf:
        return M.amax(M.abs(x), dims, keepdim=keepdim)
    if ord == -math.inf:
        return M.amin(M.abs(x), dims, keepdim=keepdim)
    if ord == 0:
        return M.sum(M.ne(x, M._t(0, x)).to(x.dtype), dims, keepdim=keepdim)
    return _core_norm(x, float(ord), dims, keepdim)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1), keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got {A.ndim}")
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":
        return M.sqrt(M.sum(M.mul(A, A), (d0, d1), keepdim=keepdim))
    if ord in ("nuc", 2, -2):
        moved = A.permute(*[i for i in range(A.ndim) if i not in (d0, d1)], d0, d1)
        s = svdvals(moved)
        out = M.sum(s, -1) if ord == "nuc" else M.amax(s, -1) if ord == 2 else M.amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        sum_dim, red_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = M.sum(M.abs(A), sum_dim, keepdim=True)
        red = M.amax if ord in (1, math.inf) else M.amin
        out = red(sums, red_dim, keepdim=True)
        return out if keepdim else out.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    raise ShapeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """torch.linalg.norm: a vector norm over `dim` (all elements when dim and ord are None), or a matrix
    norm when dim is a pair or A is 2-D with ord given."""
    if isinstance(dim, (tuple, list)) and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, tuple(dim) if dim is not None else (-2, -1),
                           keepdim, dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise ShapeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                         f"{A.ndim}D.")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cond(A: Tensor, p: Any = None) -> Tensor:
    if p is None or p in (2, -2):
        s = svdvals(A)
        big, small = M.amax(s, -1), M.amin(s, -1)
        return M.div(big, small) if p in (None, 2) else M.div(small, big)
    return M.mul(matrix_norm(A, p), matrix_norm(inv(A), p))


# ---- torch.* spellings of the same (torch.det, torch.inverse, torch.svd's older (U, S, V) form, ...) --------
class SVDOldResult(NamedTuple):
    U: Tensor
    S: Tensor
    V: Tensor


def _svd_old(A: Tensor, some: bool = True, compute_uv: bool = True) -> SVDOldResult:
    """torch.svd: (U, S, V) with V = Vh^T; `some=True` gives the reduced factors."""
    r = svd(A, full_matrices=not some)
    return SVDOldResult(r.U, r.S, V.matrix_transpose(r.Vh))


def _logdet(A: Tensor) -> Tensor:
    sign, logabs = slogdet(A)
    return M.where(M.lt(sign, 0.0), M._t(math.nan, logabs), M.where(M.eq(sign, 0.0), M._t(-math.inf, logabs),
                                                                    logabs))


TORCH_ALIASES: dict[str, Any] = {
    "det": det, "inverse": inv, "slogdet": slogdet, "logdet": _logdet, "pinverse": pinv, "svd": _svd_old,
    "qr": lambda A, some=True: qr(A, "reduced" if some else "complete"), "matrix_power": matrix_power,
    "cholesky": lambda A, upper=False: cholesky(A, upper=upper), "chain_matmul": lambda *ms: multi_dot(ms),
}
