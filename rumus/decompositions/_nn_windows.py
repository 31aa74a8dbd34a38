"""Sliding windows over the H*W planes of an [N, C, H, W] tensor, for the convolution and pooling
decompositions (im2col through `gather`, col2im through `scatter_add`: primitives both).

A window geometry (input size, kernel, stride, padding, dilation, output size) becomes one int64 index
of K*P flat plane positions (K = kh*kw kernel offsets, P = Ho*Wo outputs, offset-major) and a bool mask
of the positions that fall inside the plane; positions in the padding (or past the input in ceil mode)
index position 0 and are masked, so they read as the fill value and receive nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rumus_contracts import Device, bool_, int64

from .. import _math as M
from .. import _views
from .._creation import from_host, zeros
from .._tensor_base import Tensor
from ..ops import get as _op


@dataclass(frozen=True)
class Geometry:
    """One window sweep: (h, w) input, (kh, kw) kernel, stride, padding, dilation, (ho, wo) output."""
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int
    ho: int
    wo: int

    @property
    def kernel(self) -> int:
        return self.kh * self.kw

    @property
    def positions(self) -> int:
        return self.ho * self.wo


@dataclass(frozen=True)
class Windows:
    geometry: Geometry
    index: Tensor   # int64 [K*P]: the plane position read by kernel offset k at output p (0 outside)
    inside: Tensor  # bool [K*P]: whether that position lies inside the plane


def host_tables(g: Geometry) -> tuple[np.ndarray, np.ndarray]:
    """(rows [K, P], cols [K, P]) of every window element, in input coordinates (may lie outside)."""
    i, j = np.divmod(np.arange(g.kernel), g.kw)
    oh, ow = np.divmod(np.arange(g.positions), g.wo)
    rows = (oh * g.sh - g.ph)[None, :] + (i * g.dh)[:, None]
    cols = (ow * g.sw - g.pw)[None, :] + (j * g.dw)[:, None]
    return rows, cols


@lru_cache(maxsize=64)
def windows(g: Geometry, device: Device) -> Windows:
    """The index and mask of g on device (cached: a training step meets the same few geometries)."""
    rows, cols = host_tables(g)
    inside = (rows >= 0) & (rows < g.h) & (cols >= 0) & (cols < g.w)
    index = np.where(inside, rows * g.w + cols, 0).reshape(-1)
    return Windows(g, from_host(index, int64, device), from_host(inside.reshape(-1), bool_, device))


def _per_plane(win: Windows, n: int, c: int) -> Tensor:
    """The window index for every one of the n*c planes, [N, C, K*P] (a broadcast view of the one index)."""
    size = win.geometry.kernel * win.geometry.positions
    return _views.expand(_views.reshape(win.index, (1, 1, size)), (n, c, size))


def gather(x: Tensor, win: Windows, fill: float) -> Tensor:
    """x [N, C, H, W] -> [N, C, K, P]: every window's elements, `fill` where a window leaves the plane."""
    g = win.geometry
    n, c = x.shape[0], x.shape[1]
    if g.h * g.w == 0:  # an empty plane (the output is all padding): there is nothing to index
        return M.add(zeros(n, c, g.kernel, g.positions, dtype=x.dtype, device=x.device), fill)
    flat = _views.reshape(x, (n, c, g.h * g.w))
    cols = _op("gather")(flat, _per_plane(win, n, c), dim=2)
    cols = M.where(win.inside, cols, fill)
    return _views.reshape(cols, (n, c, g.kernel, g.positions))


def scatter(cols: Tensor, win: Windows) -> Tensor:
    """The adjoint of gather (fill 0): cols [N, C, K, P] summed into [N, C, H, W] at the window positions."""
    g = win.geometry
    n, c = cols.shape[0], cols.shape[1]
    if g.h * g.w == 0:
        return zeros(n, c, g.h, g.w, dtype=cols.dtype, device=cols.device)
    flat = M.where(win.inside, _views.reshape(cols, (n, c, g.kernel * g.positions)), 0.0)
    out = zeros(n, c, g.h * g.w, dtype=cols.dtype, device=cols.device)
    out = _op("scatter_add")(out, _per_plane(win, n, c), flat, dim=2)
    return _views.reshape(out, (n, c, g.h, g.w))
