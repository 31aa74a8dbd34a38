"""The functional forms of rumus_vision.transforms (torchvision.transforms.v2.functional's names), on rumus
tensors [..., C, H, W]: composites of core ops (interpolate, slicing views, flip, arithmetic), so they run on
every backend, keep autograd and need no kernel of their own."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import rumus as rm
from rumus import RumusError, ShapeError, Tensor
from rumus.nn import functional as F

INTERPOLATIONS = ("bilinear", "nearest", "nearest-exact")


class TransformError(RumusError, ValueError):
    """A transform argument that cannot work (unknown interpolation, a zero std)."""


def hw(size: int | Sequence[int], what: str) -> tuple[int, int]:
    """(h, w) from an int or a 1- or 2-sequence."""
    if isinstance(size, int):
        return size, size
    if len(size) == 1:
        return int(size[0]), int(size[0])
    if len(size) != 2:
        raise ShapeError(f"{what}: size must be an int or (h, w), got {size!r}")
    return int(size[0]), int(size[1])


def _image(x: Tensor, what: str) -> None:
    if x.ndim < 3:
        raise ShapeError(f"{what}: expected an image [..., C, H, W], got shape {x.shape}")


def resize(x: Tensor, size: int | Sequence[int], interpolation: str = "bilinear") -> Tensor:
    """An int resizes the shorter side to `size` keeping the aspect ratio (torchvision's rule: the longer
    side becomes int(size * long / short)); (h, w) resizes to exactly that. Bilinear is
    align_corners=False without antialiasing (torchvision's antialias=False)."""
    _image(x, "resize")
    if interpolation not in INTERPOLATIONS:
        raise TransformError(f"resize: interpolation {interpolation!r} is not supported ({', '.join(INTERPOLATIONS)})")
    h, w = x.shape[-2], x.shape[-1]
    if isinstance(size, int) or len(size) == 1:
        s = size if isinstance(size, int) else int(size[0])
        if s < 1:
            raise ShapeError(f"resize: size must be >= 1, got {s}")
        th, tw = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
    else:
        th, tw = hw(size, "resize")
    if th < 1 or tw < 1:
        raise ShapeError(f"resize: target size {(th, tw)} must be at least 1x1")
    lead = x.shape[:-3]
    flat = x.reshape(-1, *x.shape[-3:])
    out = F.interpolate(flat, size=(th, tw), mode=interpolation,
                        align_corners=False if interpolation == "bilinear" else None)
    return out.reshape(*lead, *out.shape[1:])

def crop(x: Tensor, top: int, left: int, height: int, width: int) -> Tensor:
    """x[..., top:top+height, left:left+width] (a view); the window must lie inside the image."""
    _image(x, "crop")
    h, w = x.shape[-2], x.shape[-1]
    if height < 1 or width < 1 or top < 0 or left < 0 or top + height > h or left + width > w:
        raise ShapeError(f"crop: window top={top} left={left} {height}x{width} does not fit the {h}x{w} image; "
                         f"resize or pad the image first")
    return x[..., top:top + height, left:left + width]

def center_crop(x: Tensor, size: int | Sequence[int]) -> Tensor:
    th, tw = hw(size, "center_crop")
    h, w = x.shape[-2], x.shape[-1]
    return crop(x, int(round((h - th) / 2.0)), int(round((w - tw) / 2.0)), th, tw)

def hflip(x: Tensor) -> Tensor:
    _image(x, "hflip")
    return rm.flip(x, -1)

def vflip(x: Tensor) -> Tensor:
    _image(x, "vflip")
    return rm.flip(x, -2)

def normalize(x: Tensor, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """(x - mean[c]) / std[c] per channel; a zero std is refused (it would give inf)."""
    _image(x, "normalize")
    if not x.dtype.is_floating:
        raise rm.DTypeError(f"normalize: expected a floating image, got {x.dtype}; convert with .float()")
    c = x.shape[-3]
    m, s = np.asarray(mean, np.float64).reshape(-1), np.asarray(std, np.float64).reshape(-1)
    if len(m) not in (1, c) or len(s) not in (1, c):
        raise ShapeError(f"normalize: mean and std need 1 or {c} values (one per channel), got {len(m)}, {len(s)}")
    if np.any(s == 0):
        raise TransformError(f"normalize: std {list(s)} contains 0")
    mt = rm.tensor(np.broadcast_to(m, (c,)).reshape(c, 1, 1), dtype=x.dtype, device=x.device)
    st = rm.tensor(np.broadcast_to(s, (c,)).reshape(c, 1, 1), dtype=x.dtype, device=x.device)
    return (x - mt) / st
