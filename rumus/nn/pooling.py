"""MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (no parameters; PyTorch's signatures)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional_conv as F
from ._configured import Configured
from .module import Module

# rumus.nn star-imports these.
__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"]


class MaxPool2d(Module):
    """2-D max pooling over [N, C, H, W] (kernel_size, stride, padding, dilation, ceil_mode, return_indices)."""
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation, self.return_indices, self.ceil_mode = padding, dilation, return_indices, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """2-D average pooling over [N, C, H, W] (kernel_size, stride, padding, ceil_mode, count_include_pad)."""
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Configured):
    """2-D average pooling to a fixed output size, whatever the input size."""
    _fn = staticmethod(F.adaptive_avg_pool2d)
    _attrs = ("output_size",)

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size
