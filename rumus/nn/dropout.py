"""Dropout: counter-based masks (the same seed gives the same mask on every backend); identity in eval mode."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module

# rumus.nn star-imports these.
__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class Dropout(Module):
    """Zeroes each element with probability `p` while training and scales the rest by 1 / (1 - p); the identity in eval
    mode.
    """
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    _fn = staticmethod(F.dropout2d)

    def forward(self, x: Tensor) -> Tensor:
        return type(self)._fn(x, self.p, self.training)


class Dropout1d(_ChannelDropout):
    """Zero whole channels of (N, C, L) inputs."""
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_ChannelDropout):
    """Zero whole feature maps of (N, C, H, W) inputs."""
    _fn = staticmethod(F.dropout2d)


class Dropout3d(_ChannelDropout):
    """Zero whole feature volumes of (N, C, D, H, W) inputs."""
    _fn = staticmethod(F.dropout3d)
