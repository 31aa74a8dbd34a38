"""Channel dropout (dropout1d/2d/3d): whole feature maps are zeroed together, as PyTorch's Dropout2d does
after convolutions, where neighbouring activations are correlated and element dropout regularises little."""

from __future__ import annotations

from rumus_contracts import ShapeError

from .. import _creation
from .. import _math as M
from ..tensor import Tensor
from ._functional_act import dropout


def _channel_dropout(name: str, x: Tensor, p: float, training: bool, spatial: int) -> Tensor:
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(f"{name}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, got "
                         f"shape {tuple(x.shape)}")
    if not training or p == 0.0:
        return dropout(x, p, training)
    # one mask value per (sample, channel), broadcast over the spatial dims
    keep = dropout(_creation.ones(*x.shape[: x.ndim - spatial], *([1] * spatial), dtype=x.dtype, device=x.device),
                   p, True)
    return M.mul(x, keep)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, L] input with probability `p` while `training`, scaling the rest."""
    return _channel_dropout("dropout1d", input, p, training, 1)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, H, W] input with probability `p` while `training`, scaling the rest."""
    return _channel_dropout("dropout2d", input, p, training, 2)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, D, H, W] input with probability `p` while `training`, scaling the rest."""
    return _channel_dropout("dropout3d", input, p, training, 3)


__all__ = ["dropout1d", "dropout2d", "dropout3d"]
