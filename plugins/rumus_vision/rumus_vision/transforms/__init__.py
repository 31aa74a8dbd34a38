"""Image transforms on rumus tensors [..., C, H, W], named and behaving like torchvision.transforms.v2
(antialias=False). The classes hold parameters and, for the random ones, a numpy Generator (seedable with
`generator=`); the work is in `functional`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from rumus import ShapeError, Tensor
from rumus.nn import functional as F

from . import functional
from .functional import TransformError, hw


class Compose:
    def __init__(self, transforms: Sequence[Callable[[Tensor], Tensor]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: Tensor) -> Tensor:
        for t in self.transforms:
            x = t(x)
        return x


class Resize:
    def __init__(self, size: int | Sequence[int], interpolation: str = "bilinear") -> None:
        self.size, self.interpolation = size, interpolation

    def __call__(self, x: Tensor) -> Tensor:
        return functional.resize(x, self.size, self.interpolation)


class CenterCrop:
    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = hw(size, "CenterCrop")

    def __call__(self, x: Tensor) -> Tensor:
        return functional.center_crop(x, self.size)


class _Random:
    def __init__(self, generator: np.random.Generator | None) -> None:
        self.generator = generator if generator is not None else np.random.default_rng()


class RandomCrop(_Random):
    """A window of `size` at a uniformly drawn position; `padding` (zeros) is added on every side first."""

    def __init__(self, size: int | Sequence[int], padding: int = 0,
                 generator: np.random.Generator | None = None) -> None:
        super().__init__(generator)
        self.size, self.padding = hw(size, "RandomCrop"), int(padding)

    def __call__(self, x: Tensor) -> Tensor:
        if self.padding:
            x = F.pad(x, [self.padding] * 4)
        th, tw = self.size
        h, w = x.shape[-2], x.shape[-1]
        if th > h or tw > w:
            raise ShapeError(f"RandomCrop: crop size {(th, tw)} is larger than the (padded) image {(h, w)}")
        top = int(self.generator.integers(0, h - th + 1))
        left = int(self.generator.integers(0, w - tw + 1))
        return functional.crop(x, top, left, th, tw)


class _RandomFlip(_Random):
    """Applies `flip` with probability p (one draw from the generator per call)."""

    flip: Callable[[Tensor], Tensor]

    def __init__(self, p: float = 0.5, generator: np.random.Generator | None = None) -> None:
        super().__init__(generator)
        self.p = float(p)

    def __call__(self, x: Tensor) -> Tensor:
        return type(self).flip(x) if self.generator.random() < self.p else x


class RandomHorizontalFlip(_RandomFlip):
    flip = staticmethod(functional.hflip)


class RandomVerticalFlip(_RandomFlip):
    flip = staticmethod(functional.vflip)


class Normalize:
    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean, self.std = list(mean), list(std)

    def __call__(self, x: Tensor) -> Tensor:
        return functional.normalize(x, self.mean, self.std)



__all__ = ["CenterCrop", "Compose", "Normalize", "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "Resize",
           "TransformError", "functional"]
