"""torch's lazy layers: LazyLinear, LazyConv1d, LazyConv2d, LazyBatchNorm1d, LazyBatchNorm2d. Their input size
comes from the first forward, which gives the placeholder parameters (and buffers) torch's initialisation for the
real shape in place, so an optimizer made before that forward trains them."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyConv1d", "LazyConv2d", "LazyLinear"]


def _materialize(module: Module, built: Module) -> None:
    """Give `module`'s parameters (and buffers) the shapes and initial values of `built` in place: the objects
    stay the same, so an optimizer made before the first forward keeps training them (torch's lazy modules)."""
    from .._tensor_base import _init
    for name, new in [*built.named_parameters(recurse=False), *built.named_buffers(recurse=False)]:
        old = getattr(module, name)
        wanted = old.requires_grad
        _init(old, new._storage, new.shape, new._strides, new._offset)
        old._arg_cache = None
        old.requires_grad_(wanted)


class LazyLinear(Module):
    """A Linear whose in_features is read from the first input (torch.nn.LazyLinear). Until that forward its
    weight is a placeholder; the first forward gives it torch's initialisation for the real shape, in place."""

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        from .linear import Linear
        self.in_features, self.out_features = 0, out_features
        self._factory = (bias, device, dtype)
        stand_in = Linear(1, out_features, bias, device, dtype)
        self.weight = stand_in.weight
        self.bias = stand_in.bias

    def forward(self, x: Tensor) -> Tensor:
        if self.in_features == 0:
            from .linear import Linear
            bias, device, dtype = self._factory
            self.in_features = x.shape[-1]
            _materialize(self, Linear(self.in_features, self.out_features, bias, device or x.device, dtype or x.dtype))
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features or 'lazy'}, out_features={self.out_features}, " \
               f"bias={self.bias is not None}"


class _LazyConv(Module):
    _conv: Any = None

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_channels, self.out_channels = 0, out_channels
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups,
                          bias=bias, padding_mode=padding_mode)
        self._where = (device, dtype)
        stand_in = self._conv(groups, out_channels, **self._args, device=device, dtype=dtype)
        self.weight = stand_in.weight
        self.bias = stand_in.bias
        object.__setattr__(self, "_built", stand_in)  # not a submodule: its geometry only (stride, padding, ...)

    def forward(self, x: Tensor) -> Tensor:
        if self.in_channels == 0:
            device, dtype = self._where
            self.in_channels = x.shape[1] if x.ndim == self._conv._dims + 2 else x.shape[0]
            built = self._conv(self.in_channels, self.out_channels, **self._args, device=device or x.device,
                               dtype=dtype or x.dtype)
            _materialize(self, built)
            object.__setattr__(self, "_built", built)
        g: Any = self._built
        fn = F.conv1d if self._conv._dims == 1 else F.conv2d
        return fn(x, self.weight, self.bias, g.stride, g.padding, g.dilation, g.groups)


def _conv_class(dims: int) -> Any:
    from .conv import Conv1d, Conv2d
    return {1: Conv1d, 2: Conv2d}[dims]


class LazyConv1d(_LazyConv):
    """A Conv1d whose in_channels is read from the first input (torch.nn.LazyConv1d)."""

    @property
    def _conv(self) -> Any:
        return _conv_class(1)


class LazyConv2d(_LazyConv):
    """A Conv2d whose in_channels is read from the first input (torch.nn.LazyConv2d)."""

    @property
    def _conv(self) -> Any:
        return _conv_class(2)


def _lazy_batch_norm(base: Any, doc: str) -> Any:
    class Lazy(base):  # type: ignore[misc]
        __doc__ = doc

        def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                     track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
            super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype)
            object.__setattr__(self, "_where", (device, dtype))

        def forward(self, x: Tensor) -> Tensor:
            features: int = getattr(self, "num_features")  # noqa: B009  (mypy cannot see the base class here)
            if features == 0:
                device, dtype = self._where
                built = base(x.shape[1], self.eps, self.momentum, self.affine, self.track_running_stats,
                             device or x.device, dtype or x.dtype)
                _materialize(self, built)
                self.num_features = x.shape[1]
            return super().forward(x)  # type: ignore[no-any-return]

    Lazy.__name__ = Lazy.__qualname__ = "Lazy" + base.__name__
    return Lazy


def _lazy_bn_bases() -> tuple[Any, Any]:
    from .normalization import BatchNorm1d, BatchNorm2d
    return BatchNorm1d, BatchNorm2d


LazyBatchNorm1d = _lazy_batch_norm(_lazy_bn_bases()[0], "A BatchNorm1d whose num_features comes from the first input.")
LazyBatchNorm2d = _lazy_batch_norm(_lazy_bn_bases()[1], "A BatchNorm2d whose num_features comes from the first input.")
