"""torch.nn.functional's pad, interpolate, normalize, cosine_similarity, kl_div as composites of core ops
(cat, index_select, where, sums), so every backend runs them and their gradients come from the primitives.
Index patterns (reflect/replicate padding, nearest/bilinear source positions) depend only on shapes and are
computed on the host."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import RumusError, ShapeError

from .. import _creation
from .. import _math as M
from .._composites_torch import norm
from .._indexing import index_select
from ..tensor import Tensor
from ._functional_loss import reduce_loss


def _index(values: np.ndarray, like: Tensor) -> Tensor:
    return _creation.tensor(values.astype(np.int64).tolist(), dtype="int64", device=like.device)


# ---- padding --------------------------------------------------------------------------------------------
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """`pad` lists (left, right) amounts from the last dim backwards, as in PyTorch; negative amounts crop."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding length {len(pad)} must be even and at most 2 * {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise RumusError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    x = input
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        left, right = int(pad[2 * i]), int(pad[2 * i + 1])
        x = _pad_dim(x, d, left, right, mode, 0.0 if value is None else float(value))
    return x


def _pad_dim(x: Tensor, d: int, left: int, right: int, mode: str, value: float) -> Tensor:
    n = x.shape[d]
    if left < 0:
        x, n, left = x.narrow(d, -left, n + left), n + left, 0
    if right < 0:
        x, n, right = x.narrow(d, 0, n + right), n + right, 0
    if not left and not right:
        return x
    if mode == "constant":
        parts = []
        for amount in (left, right):
            shape = list(x.shape)
            shape[d] = amount
            parts.append(_creation.full(tuple(shape), value, dtype=x.dtype, device=x.device))
        return M.cat([parts[0], x, parts[1]], d)
    out_shape = list(x.shape)
    out_shape[d] = n + left + right
    _creation.check_size("pad", out_shape, builtins_max(x.element_size(), 8))  # the result and its host index
    pos = np.arange(-left, n + right)
    if mode == "reflect":
        if left >= n or right >= n:
            raise ShapeError(f"pad: reflect padding of ({left}, {right}) needs a dimension larger than both, "
                             f"this one has size {n}")
        pos = np.abs(pos)
        pos = np.where(pos > n - 1, 2 * (n - 1) - pos, pos)
    elif mode == "replicate":
        pos = np.clip(pos, 0, n - 1)
    else:  # circular
        if left > n or right > n:
            raise ShapeError(f"pad: circular padding of ({left}, {right}) exceeds the dimension size {n}")
        pos = pos % n
    return index_select(x, d, _index(pos, x))


# ---- resizing -------------------------------------------------------------------------------------------
def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize [N, C, ...] input to `size` or by `scale_factor` (modes nearest, linear, bilinear, ...), as torch's."""
    spatial = input.ndim - 2
    if spatial < 1:
        raise ShapeError(f"interpolate: expected a (N, C, ...) input with spatial dims, got shape {input.shape}")
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear"):
        raise RumusError(f"interpolate: mode {mode!r} is not supported (nearest, nearest-exact, linear, "
                         f"bilinear, trilinear)")
    if antialias:
        raise RumusError("interpolate(antialias=True) is not supported")
    if mode.startswith("nearest") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    in_sizes = list(input.shape[2:])
    scales: list[float | None]
    if size is not None:
        if scale_factor is not None:
            raise ValueError("only one of size or scale_factor should be defined")
        out_sizes = [int(s) for s in (size if isinstance(size, (list, tuple)) else [size] * spatial)]
        scales = [None] * spatial
    elif scale_factor is not None:
        sf = [float(s) for s in (scale_factor if isinstance(scale_factor, (list, tuple)) else
                                 [scale_factor] * spatial)]
        if not all(math.isfinite(s) and s > 0 for s in sf):
            raise ShapeError(f"interpolate: scale_factor must be finite and positive, got {scale_factor}")
        out_sizes = [int(math.floor(n * s)) for n, s in zip(in_sizes, sf)]
        scales = [None if recompute_scale_factor else s for s in sf]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if any(n <= 0 for n in out_sizes):
        raise ShapeError(f"interpolate: output sizes must be positive, got {out_sizes} for input sizes {in_sizes}")
    _creation.check_size("interpolate", [*input.shape[:2], *out_sizes], builtins_max(input.element_size(), 8))
    x = input
    for k in range(spatial):
        d = 2 + k
        n_in, n_out, scale = in_sizes[k], out_sizes[k], scales[k]
        # PyTorch's source-index scale: the user's scale_factor when given, else in/out
        ratio = (1.0 / scale) if scale else n_in / n_out
        if mode == "nearest":
            src = np.minimum(np.floor(np.arange(n_out) * ratio).astype(np.int64), n_in - 1)
            x = index_select(x, d, _index(src, x))
        elif mode == "nearest-exact":
            src = np.minimum(np.floor((np.arange(n_out) + 0.5) * ratio).astype(np.int64), n_in - 1)
            x = index_select(x, d, _index(src, x))
        else:
            x = _linear_1d(x, d, n_in, n_out, ratio, bool(align_corners))
    return x


def builtins_max(a: int, b: int) -> int:
    return a if a > b else b


def _linear_1d(x: Tensor, d: int, n_in: int, n_out: int, ratio: float, align_corners: bool) -> Tensor:
    out = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = out * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        src = np.maximum((out + 0.5) * ratio - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w1 = src - i0
    shape = [1] * x.ndim
    shape[d] = n_out
    w1t = _creation.tensor(w1.reshape(shape).tolist(), dtype=x.dtype, device=x.device)
    a = index_select(x, d, _index(i0, x))
    b = index_select(x, d, _index(i1, x))
    return M.add(a, M.mul(M.sub(b, a), w1t))


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of `interpolate`, kept for PyTorch programs."""
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---- similarity and divergence ------------------------------------------------------------------------------
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Tensor:
    """`input` divided by its `p`-norm along `dim` (at least `eps`)."""
    return M.div(input, M.clamp(norm(input, p, dim, keepdim=True), min=eps))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """PyTorch's form: (x1 . x2) / sqrt(clamp_min(|x1|^2 |x2|^2, eps^2))."""
    w12 = M.sum(M.mul(x1, x2), dim)
    w1 = M.sum(M.mul(x1, x1), dim)
    w2 = M.sum(M.mul(x2, x2), dim)
    return M.div(w12, M.sqrt(M.clamp(M.mul(w1, w2), min=eps * eps)))


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """The `p`-norm of `x1 - x2 + eps` along the last dim."""
    return norm(M.add(M.sub(x1, x2), eps), p, -1, keepdim)


def kl_div(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """KL(target || exp(input)) pointwise: target * (log target - input), 0 where target is 0."""
    if log_target:
        loss = M.mul(M.exp(target), M.sub(target, input))
    else:
        positive = M.gt(target, 0)
        safe = M.where(positive, target, M._t(1, target))  # log(1) = 0 keeps the gradient finite where target is 0
        loss = M.where(positive, M.mul(target, M.sub(M.log(safe), input)), M._t(0, input))
    if reduction == "batchmean":
        return M.div(M.sum(loss), float(input.shape[0]) if input.ndim else 1.0)
    return reduce_loss(loss, reduction)


__all__ = ["cosine_similarity", "interpolate", "kl_div", "normalize", "pad", "pairwise_distance", "upsample"]
