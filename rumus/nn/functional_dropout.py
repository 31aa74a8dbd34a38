"""Channel dropout (dropout1d/2d/3d): whole feature maps are zeroed together, as PyTorch's Dropout2d does
after convolutions, where neighbouring activations are correlated and element dropout regularises little."""

from __future__ import annotations

import warnings

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
    """torch's rule, kept as torch keeps it: one mask value per (dim 0, dim 1) pair, so a 4-D (N, C, H, W)
    input drops whole channels, a 3-D input is read as (N, C, L) (with torch's warning), and other ranks
    get a warning and element-wise masks over their first two dims (a 2-D input: plain dropout)."""
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      f"result in an error in a future release. To retain the behavior and silence this warning, "
                      f"please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      f"inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 3D or 4D inputs).", UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", UserWarning, stacklevel=2)
    if input.ndim < 2:
        raise ShapeError(f"dropout2d: Feature dropout requires at least 2 dimensions in the input, got shape "
                         f"{tuple(input.shape)}")
    if not training or p == 0.0:
        return dropout(input, p, training)
    keep = dropout(_creation.ones(*input.shape[:2], *([1] * (input.ndim - 2)), dtype=input.dtype,
                                  device=input.device), p, True)
    return M.mul(input, keep)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, D, H, W] input with probability `p` while `training`, scaling the rest."""
    return _channel_dropout("dropout3d", input, p, training, 3)


__all__ = ["dropout1d", "dropout2d", "dropout3d"]
