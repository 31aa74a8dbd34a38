"""BatchNorm1d/2d, LayerNorm, GroupNorm, RMSNorm with PyTorch's parameter and buffer names:
weight, bias; running_mean, running_var, num_batches_tracked (BatchNorm)."""

from __future__ import annotations

from typing import Any

from rumus_contracts import ShapeError, int64

from .. import _creation
from .. import _math as M
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import functional_norm as F
from . import init
from .module import Module
from .parameter import Parameter

# rumus.nn star-imports these.
__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm"]


def _affine(module: Module, shape: tuple[int, ...], weight: bool, bias: bool, device: Any, dtype: Any) -> None:
    """A norm layer's scale (ones) and shift (zeros) of `shape`, or None registered in their place, as
    PyTorch's layers hold them (absent from the state dict, `module.weight is None`)."""
    for name, wanted, make in (("weight", weight, _creation.ones), ("bias", bias, _creation.zeros)):
        if wanted:
            setattr(module, name, Parameter(make(*shape, device=device, dtype=dtype)))
        else:
            module.register_parameter(name, None)


class _BatchNorm(Module):
    _dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight: Parameter | None
        self.bias: Parameter | None
        _affine(self, (num_features,), affine, affine, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _creation.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _creation.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _creation.zeros((), dtype=int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.weight is not None and self.bias is not None:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self._dims:
            raise ShapeError(f"{type(self).__name__}: expected a {' or '.join(f'{d}-D' for d in self._dims)} input, "
                             f"got shape {x.shape}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.copy_(M.add(self.num_batches_tracked, 1))
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over [N, C] or [N, C, L] inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over [N, C, H, W] inputs."""

    _dims = (4,)


def _shape(normalized_shape: Any) -> tuple[int, ...]:
    return (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Normalises over the last `normalized_shape` dims, then scales and shifts (elementwise affine)."""
    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape, self.eps, self.elementwise_affine = _shape(normalized_shape), eps, elementwise_affine
        self.weight: Parameter | None
        self.bias: Parameter | None
        _affine(self, self.normalized_shape, elementwise_affine, elementwise_affine and bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalises each of `num_groups` channel groups per sample, then scales and shifts per channel."""
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise ShapeError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight: Parameter | None
        self.bias: Parameter | None
        _affine(self, (num_channels,), affine, affine, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """Divides by the root mean square over the last `normalized_shape` dims, then scales."""
    def __init__(self, normalized_shape: Any, eps: float | None = None, elementwise_affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape, self.eps, self.elementwise_affine = _shape(normalized_shape), eps, elementwise_affine
        self.weight: Parameter | None
        if elementwise_affine:
            self.weight = Parameter(_creation.ones(*self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
