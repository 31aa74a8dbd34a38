"""Functional forms that real programs reach for beyond the core layers: pixel (un)shuffle, GLU, softmin,
gumbel-softmax, 1-d and adaptive-max pooling, instance norm, unfold/fold (im2col), affine_grid and
grid_sample (spatial transformers), margin and triplet losses. Each is written with core ops, so gradients
come from their formulas and every backend runs them; tests/compat/test_torch_nn_extra.py compares them
with torch."""

from __future__ import annotations

import math
from typing import Any

from rumus_contracts import ShapeError

from .. import _creation
from .. import _math as M
from .. import _views as V
from ..tensor import Tensor
from ._functional_loss import reduce_loss


def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """[*, C*r*r, H, W] -> [*, C, H*r, W*r]."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = V.reshape(input, (*lead, c // (r * r), r, r, h, w))
    x = V.permute(x, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return V.reshape(x, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """[*, C, H*r, W*r] -> [*, C*r*r, H, W]."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ShapeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but input "
                         f"has height {h} and width {w} with downscale_factor={r}")
    n = len(lead)
    x = V.reshape(input, (*lead, c, h // r, r, w // r, r))
    x = V.permute(x, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return V.reshape(x, (*lead, c * r * r, h // r, w // r))


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: the first half of `dim` times the sigmoid of the second half."""
    if input.shape[dim] % 2:
        raise ShapeError(f"glu: Halving dimension must be even, but dimension {dim} is size {input.shape[dim]}")
    a, b = V.chunk(input, 2, dim)
    return M.mul(a, M.sigmoid(b))


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """softmax of the negated input along `dim`."""
    x = input if dtype is None else input.to(dtype)
    return M.softmax(M.neg(x), -1 if dim is None else dim)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """Samples from the Gumbel-softmax distribution (one-hot with a soft gradient when `hard`)."""
    u = _creation.rand(*logits.shape, dtype=logits.dtype, device=logits.device)
    gumbels = M.neg(M.log(M.neg(M.log(M.clamp(u, min=eps)))))
    y = M.softmax(M.div(M.add(logits, gumbels), tau), dim)
    if not hard:
        return y
    index = M.argmax(y, dim, keepdim=True)
    from .._composites_torch import scatter
    y_hard = scatter(_creation.zeros_like(y), dim, index, 1.0)
    return M.add(M.sub(y_hard, y.detach()), y)  # straight-through: the forward is one-hot, the gradient soft


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else `value`."""
    return M.where(M.gt(input, threshold), input, M._t(float(value), input))


def _pool1d(x: Tensor, kernel: int, stride: int, padding: int, fill: float, reduce: str,
            count_include_pad: bool = True) -> Tensor:
    from .functional_torch import pad
    if x.ndim not in (2, 3):
        raise ShapeError(f"pool1d: expected 2D or 3D input, got shape {tuple(x.shape)}")
    if padding:
        x = pad(x, (padding, padding), "constant", fill)
    win = x.unfold(-1, kernel, stride)
    if reduce == "max":
        return M.amax(win, -1)
    if count_include_pad or not padding:
        return M.mean(win, -1)
    ones = pad(_creation.ones(x.shape[-1] - 2 * padding, dtype=x.dtype, device=x.device), (padding, padding),
               "constant", 0.0)
    counts = M.sum(ones.unfold(-1, kernel, stride), -1)
    return M.div(M.sum(win, -1), counts)


def max_pool1d(input: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0, dilation: int = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """Max pooling over the last dim of [N, C, L] input."""
    if dilation != 1 or ceil_mode or return_indices:
        raise ShapeError("max_pool1d: dilation, ceil_mode and return_indices are not supported; use max_pool2d on "
                         "an unsqueezed input")
    k = int(kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size)
    s = k if stride is None else int(stride[0] if isinstance(stride, (tuple, list)) else stride)
    return _pool1d(input, k, s, int(padding), -math.inf, "max")


def avg_pool1d(input: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Average pooling over the last dim of [N, C, L] input."""
    if ceil_mode:
        raise ShapeError("avg_pool1d: ceil_mode=True is not supported")
    k = int(kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size)
    s = k if stride is None else int(stride[0] if isinstance(stride, (tuple, list)) else stride)
    return _pool1d(input, k, s, int(padding), 0.0, "mean", count_include_pad)


def _adaptive_bounds(n_in: int, n_out: int) -> list[tuple[int, int]]:
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_avg_pool1d(input: Tensor, output_size: int) -> Tensor:
    """Average over each of `output_size` windows of the last dim."""
    n = input.shape[-1]
    parts = [M.mean(V.narrow(input, -1, a, b - a), -1, keepdim=True) for a, b in _adaptive_bounds(n, output_size)]
    return M.cat(parts, -1)


def adaptive_max_pool1d(input: Tensor, output_size: int, return_indices: bool = False) -> Tensor:
    """Maximum over each of `output_size` windows of the last dim."""
    if return_indices:
        raise ShapeError("adaptive_max_pool1d: return_indices=True is not supported")
    n = input.shape[-1]
    parts = [M.amax(V.narrow(input, -1, a, b - a), -1, keepdim=True) for a, b in _adaptive_bounds(n, output_size)]
    return M.cat(parts, -1)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Maximum over each cell of an `output_size` grid over the last two dims."""
    if return_indices:
        raise ShapeError("adaptive_max_pool2d: return_indices=True is not supported")
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = input.shape[-2], input.shape[-1]
    oh, ow = h if oh is None else oh, w if ow is None else ow
    rows = []
    for a, b in _adaptive_bounds(h, oh):
        band = V.narrow(input, -2, a, b - a)
        rows.append(M.cat([M.amax(V.narrow(band, -1, c, d - c), (-2, -1), keepdim=True)
                           for c, d in _adaptive_bounds(w, ow)], -1))
    return M.cat(rows, -2)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Per-sample, per-channel normalisation over the spatial dims ([N, C, *])."""
    if running_mean is not None or running_var is not None or not use_input_stats:
        raise ShapeError("instance_norm: running statistics (track_running_stats=True) are not supported")
    dims = tuple(range(2, input.ndim))
    mean = M.mean(input, dims, keepdim=True)
    centred = M.sub(input, mean)
    var = M.mean(M.mul(centred, centred), dims, keepdim=True)
    out = M.mul(centred, M.rsqrt(M.add(var, eps)))
    shape = (1, -1) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = M.mul(out, V.reshape(weight, shape))
    if bias is not None:
        out = M.add(out, V.reshape(bias, shape))
    return out


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """im2col: [N, C, H, W] -> [N, C*kh*kw, L], L the number of sliding blocks (torch's layout)."""
    from .functional_torch import pad
    kh, kw = _pair(kernel_size)
    dh, dw = _pair(dilation)
    ph, pw = _pair(padding)
    sh, sw = _pair(stride)
    if input.ndim != 4:
        raise ShapeError(f"unfold: expected a 4-D input [N, C, H, W], got shape {tuple(input.shape)}")
    x = pad(input, (pw, pw, ph, ph), "constant", 0.0) if ph or pw else input
    n, c, h, w = x.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"unfold: the kernel {kh}x{kw} (dilation {dh}x{dw}) does not fit the padded input {h}x{w}")
    blocks = []
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            blocks.append(V.reshape(patch, (n, c, 1, oh * ow)))
    cols = M.cat(blocks, 2)  # [N, C, kh*kw, L]
    return V.reshape(cols, (n, c * kh * kw, oh * ow))


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:
    """col2im, unfold's adjoint: [N, C*kh*kw, L] -> [N, C, H, W], overlapping blocks summed."""
    kh, kw = _pair(kernel_size)
    dh, dw = _pair(dilation)
    ph, pw = _pair(padding)
    sh, sw = _pair(stride)
    H, W = _pair(output_size)
    n, ckk, length = input.shape
    c = ckk // (kh * kw)
    hp, wp = H + 2 * ph, W + 2 * pw
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    if c * kh * kw != ckk or oh * ow != length:
        raise ShapeError(f"fold: input of shape {tuple(input.shape)} does not match output_size {(H, W)} with "
                         f"kernel {(kh, kw)}, dilation {(dh, dw)}, padding {(ph, pw)}, stride {(sh, sw)}")
    cols = V.reshape(input, (n, c, kh * kw, oh, ow))
    import numpy as np
    from .._indexing import index_add
    rows = np.arange(oh) * sh
    colsi = np.arange(ow) * sw
    out = _creation.zeros(n, c, hp * wp, dtype=input.dtype, device=input.device)
    for i in range(kh):
        for j in range(kw):
            pos = ((rows[:, None] + i * dh) * wp + (colsi[None, :] + j * dw)).reshape(-1)
            idx = _creation.tensor(pos.astype(np.int64), device=input.device)
            out = index_add(out, 2, idx, V.reshape(cols[:, :, i * kw + j], (n, c, oh * ow)))
    out = V.reshape(out, (n, c, hp, wp))
    return out[:, :, ph: ph + H, pw: pw + W]


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """Sampling grids [N, H, W, 2] (x, y in [-1, 1]) from 2-D affine matrices theta [N, 2, 3]."""
    n, _, h, w = (int(s) for s in size)
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ShapeError(f"affine_grid: expected theta of shape [N, 2, 3] for a 4-D size, got {tuple(theta.shape)}")
    ac = bool(align_corners)

    def axis(k: int) -> Tensor:
        if k == 1:
            return _creation.zeros(1, dtype=theta.dtype, device=theta.device)
        lin = _creation.linspace(-1.0, 1.0, k, dtype=theta.dtype, device=theta.device)
        return lin if ac else M.mul(lin, (k - 1) / k)

    xs, ys = axis(w), axis(h)
    base = M.stack([V.expand(V.reshape(xs, (1, w)), (h, w)), V.expand(V.reshape(ys, (h, 1)), (h, w)),
                    _creation.ones(h, w, dtype=theta.dtype, device=theta.device)], -1)  # [H, W, 3]
    grid = M.matmul(V.reshape(base, (1, h * w, 3)), V.transpose(theta, 1, 2))  # [N, H*W, 2]
    return V.reshape(grid, (n, h, w, 2))


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Samples input [N, C, H, W] at grid [N, Ho, Wo, 2] (x, y in [-1, 1]): bilinear or nearest, zeros or
    border padding (torch's conventions); gradients flow to both input and grid."""
    if mode not in ("bilinear", "nearest") or padding_mode not in ("zeros", "border"):
        raise ShapeError(f"grid_sample: mode {mode!r} / padding_mode {padding_mode!r} not supported (bilinear or "
                         f"nearest; zeros or border)")
    n, c, h, w = input.shape
    _, ho, wo, _ = grid.shape
    ac = bool(align_corners)
    gx, gy = grid[..., 0], grid[..., 1]
    if ac:
        ix, iy = M.mul(M.add(gx, 1.0), (w - 1) / 2), M.mul(M.add(gy, 1.0), (h - 1) / 2)
    else:
        ix, iy = M.div(M.sub(M.mul(M.add(gx, 1.0), w), 1.0), 2.0), M.div(M.sub(M.mul(M.add(gy, 1.0), h), 1.0), 2.0)
    if padding_mode == "border":
        # torch's clip: no gradient where the coordinate is clipped, at the edges themselves included
        ix, iy = _clip_border(ix, w - 1.0), _clip_border(iy, h - 1.0)
    flat = V.reshape(input, (n, c, h * w))

    def gather_at(xi: Tensor, yi: Tensor) -> Tensor:
        """input at integer positions (float tensors holding ints), 0 outside; -> [N, C, Ho, Wo]."""
        inside = M.logical_and(M.logical_and(M.ge(xi, 0.0), M.le(xi, w - 1.0)),
                               M.logical_and(M.ge(yi, 0.0), M.le(yi, h - 1.0)))
        xc, yc = M.clamp(xi, 0.0, w - 1.0), M.clamp(yi, 0.0, h - 1.0)
        idx = M.add(M.mul(yc, float(w)), xc).detach().to("int64")
        idx = V.expand(V.reshape(idx, (n, 1, ho * wo)), (n, c, ho * wo))
        from .._indexing import gather
        vals = V.reshape(gather(flat, 2, idx), (n, c, ho, wo))
        return M.mul(vals, V.reshape(inside.to(input.dtype), (n, 1, ho, wo)))

    if mode == "nearest":
        return gather_at(M.round(ix), M.round(iy))
    x0, y0 = M.floor(ix), M.floor(iy)
    x1, y1 = M.add(x0, 1.0), M.add(y0, 1.0)
    wx1, wy1 = M.sub(ix, x0), M.sub(iy, y0)
    wx0, wy0 = M.sub(1.0, wx1), M.sub(1.0, wy1)

    def weight(a: Tensor, b: Tensor) -> Tensor:
        return V.reshape(M.mul(a, b), (n, 1, ho, wo))

    out = M.mul(gather_at(x0, y0), weight(wx0, wy0))
    out = M.add(out, M.mul(gather_at(x1, y0), weight(wx1, wy0)))
    out = M.add(out, M.mul(gather_at(x0, y1), weight(wx0, wy1)))
    return M.add(out, M.mul(gather_at(x1, y1), weight(wx1, wy1)))


def _clip_border(coord: Tensor, limit: float) -> Tensor:
    inside = M.logical_and(M.gt(coord, 0.0), M.lt(coord, limit))
    return M.where(inside, coord, M.clamp(coord, 0.0, limit).detach())


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """max(0, -target * (x1 - x2) + margin)."""
    return reduce_loss(M.relu(M.add(M.mul(M.neg(target), M.sub(input1, input2)), margin)), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Tensor:
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0)."""
    from .functional_torch import pairwise_distance
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = M.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return reduce_loss(M.relu(M.add(M.sub(d_pos, d_neg), margin)), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) for target 1, max(0, cos - margin) for target -1."""
    eps = 1e-12  # torch's EPSILON in the denominators
    dot = M.sum(M.mul(input1, input2), -1)
    mag = M.sqrt(M.mul(M.add(M.sum(M.mul(input1, input1), -1), eps), M.add(M.sum(M.mul(input2, input2), -1), eps)))
    cos = M.div(dot, mag)
    pos = M.sub(1.0, cos)
    neg = M.relu(M.sub(cos, margin))
    zero = M._t(0.0, cos)
    loss = M.add(M.where(M.eq(target, 1), pos, zero), M.where(M.eq(target, -1), neg, zero))
    return reduce_loss(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), for targets of +1 / -1."""
    return reduce_loss(M.log1p(M.exp(M.mul(M.neg(target), input))), reduction)


__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d", "affine_grid", "avg_pool1d",
    "cosine_embedding_loss", "fold", "glu", "grid_sample", "gumbel_softmax", "instance_norm", "margin_ranking_loss",
    "max_pool1d", "pixel_shuffle", "pixel_unshuffle", "soft_margin_loss", "softmin", "threshold",
    "triplet_margin_loss", "unfold",
]
