"""Conv1d, Conv2d, ConvTranspose2d: PyTorch's signatures, attribute names, weight layouts and init.

    Conv1d.weight          [out_channels, in_channels / groups, k]
    Conv2d.weight          [out_channels, in_channels / groups, kh, kw]
    ConvTranspose2d.weight [in_channels, out_channels / groups, kh, kw]
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import RumusError

from ..tensor import Tensor
from . import functional_conv as F
from . import init
from .module import Module
from .parameter import Parameter, weight_and_bias

# rumus.nn star-imports these.
__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]


class _ConvNd(Module):
    """Shared construction: checks, parameters, PyTorch's default init, repr."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...] | str, dilation: tuple[int, ...], transposed: bool,
                 output_padding: tuple[int, ...], groups: int, bias: bool, padding_mode: str, device: Any,
                 dtype: Any) -> None:
        super().__init__()
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise RumusError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise RumusError(f"{name}: padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
            if padding == "same" and any(s != 1 for s in stride):
                raise RumusError(f"{name}: padding='same' is not supported for strided convolutions")
        if padding_mode != "zeros":
            raise RumusError(f"{name}: padding_mode={padding_mode!r} is not supported; only 'zeros' is")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.transposed, self.output_padding, self.groups, self.padding_mode = transposed, output_padding, groups, \
            padding_mode
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight, bias_param = weight_and_bias((*shape, *kernel_size), out_channels if bias else None, device,
                                                  dtype)
        self.bias: Parameter | None
        self.register_parameter("bias", bias_param)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.layer_default_(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        ones = (1,) * len(self.kernel_size)
        if self.padding != (0,) * len(self.kernel_size):
            s += f", padding={self.padding!r}"
        if self.dilation != ones:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.kernel_size):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


def _tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    items = tuple(int(v) for v in value)
    if len(items) != n:
        raise RumusError(f"{name} must be an int or a {n}-tuple, got {value!r}")
    return items


class _Conv(_ConvNd):
    """Conv1d / Conv2d: PyTorch's constructor, its int-or-tuple arguments widened to `_dims` entries."""

    _dims = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        n = self._dims
        pad = padding if isinstance(padding, str) else _tuple(padding, n, "padding")
        super().__init__(in_channels, out_channels, _tuple(kernel_size, n, "kernel_size"), _tuple(stride, n, "stride"),
                         pad, _tuple(dilation, n, "dilation"), False, (0,) * n, groups, bias, padding_mode, device,
                         dtype)


class Conv1d(_Conv):
    """1-D convolution over [N, C, L] inputs; weight [out, in / groups, k], as torch.nn.Conv1d."""
    _dims = 1

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_Conv):
    """2-D convolution over [N, C, H, W] inputs; weight [out, in / groups, kh, kw], as torch.nn.Conv2d."""
    _dims = 2

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class _ConvTranspose(_ConvNd):
    """ConvTranspose1d / ConvTranspose2d: PyTorch's constructor (output_padding before groups, dilation last), its
    int-or-tuple arguments widened to `_dims` entries."""

    _dims = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        n = self._dims
        super().__init__(in_channels, out_channels, _tuple(kernel_size, n, "kernel_size"), _tuple(stride, n, "stride"),
                         _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation"), True,
                         _tuple(output_padding, n, "output_padding"), groups, bias, padding_mode, device, dtype)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution over [N, C, L] inputs; weight [in, out / groups, k], as torch.nn.ConvTranspose1d
    (computed as the 2-D one over a height of 1)."""
    _dims = 1

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        output_padding: Any = self.output_padding
        if output_size is not None:
            (length,) = tuple(output_size)[-1:]  # as the 2-D rule over a height of 1
            pad = int(self.padding[0])  # a transposed convolution's padding is a number, never "same"
            _, extra = F.transposed_output_padding((1, x.shape[-1]), (1, length), (1, self.kernel_size[0]),
                                                   (1, self.stride[0]), (0, pad), (1, self.dilation[0]))
            output_padding = (extra,)
        unbatched = x.ndim == 2
        x4 = (x.unsqueeze(0) if unbatched else x).unsqueeze(2)
        y = F.conv_transpose2d(x4, self.weight.unsqueeze(2), self.bias, (1, self.stride[0]), (0, int(self.padding[0])),
                               (0, tuple(output_padding)[0]), self.groups, (1, self.dilation[0]))
        y = y.squeeze(2)
        return y.squeeze(0) if unbatched else y


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution (the gradient of Conv2d with respect to its input); weight [in, out / groups, kh, kw].
    """
    _dims = 2

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        output_padding: Any = self.output_padding
        if output_size is not None:
            hw = tuple(output_size)[-2:]
            output_padding = F.transposed_output_padding(x.shape[-2:], hw, F.pair(self.kernel_size),
                                                         F.pair(self.stride), F.pair(self.padding),
                                                         F.pair(self.dilation))
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                                  self.dilation)
