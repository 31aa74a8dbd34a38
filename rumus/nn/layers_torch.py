"""Layers of torch.nn that real programs use beyond the core families: pixel (un)shuffle, GLU, PReLU, padding
layers, Upsample, Unflatten, 1-d and adaptive-max pooling, instance norm, Fold/Unfold, distance modules,
margin and triplet losses, Bilinear, ParameterList/ParameterDict. Names, arguments, parameter names and
defaults are torch's; each forward is a rumus.nn.functional call."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .. import _creation
from .. import _math as M
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "Bilinear", "ConstantPad1d",
    "ConstantPad2d", "CosineEmbeddingLoss", "CosineSimilarity", "Fold", "GLU", "InstanceNorm1d", "InstanceNorm2d",
    "KLDivLoss", "MarginRankingLoss", "MaxPool1d", "PReLU", "PairwiseDistance", "ParameterDict", "ParameterList",
    "PixelShuffle", "PixelUnshuffle", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
    "Softmin", "SoftMarginLoss", "Threshold", "TripletMarginLoss", "Unflatten", "Unfold", "Upsample",
    "UpsamplingBilinear2d", "UpsamplingNearest2d", "ZeroPad1d", "ZeroPad2d",
]


class PixelShuffle(Module):
    """[*, C*r*r, H, W] -> [*, C, H*r, W*r] (sub-pixel convolution's rearrangement)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """[*, C, H*r, W*r] -> [*, C*r*r, H, W], PixelShuffle's inverse."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class GLU(Module):
    """Gated linear unit: the first half of `dim` times the sigmoid of the second half."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(x, self.dim)


class Softmin(Module):
    """softmax of the negated input along `dim`."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmin(x, self.dim)


class Threshold(Module):
    """x where x > threshold, else `value`."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value = threshold, value

    def forward(self, x: Tensor) -> Tensor:
        return F.threshold(x, self.threshold, self.value)


class PReLU(Module):
    """max(0, x) + weight * min(0, x), one learnt slope (or one per channel, dim 1)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(_creation.full((num_parameters,), float(init), dtype=dtype or "float32",
                                               device=device))

    def forward(self, x: Tensor) -> Tensor:
        w: Tensor = self.weight
        if self.num_parameters > 1 and x.ndim >= 2:
            w = w.reshape((1, -1) + (1,) * (x.ndim - 2))
        return M.add(M.relu(x), M.mul(w, M.minimum(x, M._t(0.0, x))))

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size`."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _Pad(Module):
    mode = "constant"
    sides = 2

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = (padding,) * self.sides if isinstance(padding, int) else tuple(padding)
        self.value = value

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, self.mode, self.value if self.mode == "constant" else None)

    def extra_repr(self) -> str:
        return f"padding={self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


class ConstantPad1d(_Pad):
    """Pads the last dim with `value` (torch.nn.ConstantPad1d)."""

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding, value)


class ConstantPad2d(_Pad):
    """Pads the last two dims with `value` (left, right, top, bottom)."""

    sides = 4

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding, value)


class ZeroPad1d(_Pad):
    """Pads the last dim with zeros."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)


class ZeroPad2d(_Pad):
    """Pads the last two dims with zeros."""

    sides = 4

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    """Pads the last dim by reflecting the input at its edges."""

    mode = "reflect"


class ReflectionPad2d(_Pad):
    """Pads the last two dims by reflecting the input at its edges."""

    mode, sides = "reflect", 4


class ReplicationPad1d(_Pad):
    """Pads the last dim by repeating the edge values."""

    mode = "replicate"


class ReplicationPad2d(_Pad):
    """Pads the last two dims by repeating the edge values."""

    mode, sides = "replicate", 4


class Upsample(Module):
    """Resizes by `size` or `scale_factor` with `mode` (nearest, linear, bilinear, ...)."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, size=self.size, scale_factor=self.scale_factor, mode=self.mode,
                             align_corners=self.align_corners)

    def extra_repr(self) -> str:
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling with align_corners=True."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class MaxPool1d(Module):
    """Max pooling over the last dim of [N, C, L] input."""

    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0, dilation: int = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool1d(Module):
    """Average pooling over the last dim of [N, C, L] input."""

    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AdaptiveAvgPool1d(Module):
    """Average over each of `output_size` equal-as-possible windows of the last dim."""

    def __init__(self, output_size: int) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveMaxPool1d(Module):
    """Maximum over each of `output_size` equal-as-possible windows of the last dim."""

    def __init__(self, output_size: int, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool1d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(Module):
    """Maximum over each cell of an `output_size` grid over the last two dims."""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)


class _InstanceNorm(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if track_running_stats:
            raise ValueError(f"{type(self).__name__}: track_running_stats=True is not supported")
        self.num_features, self.eps, self.momentum, self.affine = num_features, eps, momentum, affine
        self.track_running_stats = False
        self.weight: Parameter | None
        self.bias: Parameter | None
        if affine:
            self.weight = Parameter(_creation.ones(num_features, dtype=dtype, device=device))
            self.bias = Parameter(_creation.zeros(num_features, dtype=dtype, device=device))
        else:
            self.weight = None
            self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        unbatched = x.ndim == self._batched_ndim - 1
        if unbatched:
            x = x.unsqueeze(0)
        out = F.instance_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)
        return out.squeeze(0) if unbatched else out

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, " \
               f"track_running_stats={self.track_running_stats}"


class InstanceNorm1d(_InstanceNorm):
    """Normalises each sample's channels over the length ([N, C, L]); optional affine."""

    _batched_ndim = 3


class InstanceNorm2d(_InstanceNorm):
    """Normalises each sample's channels over H and W ([N, C, H, W]); optional affine."""

    _batched_ndim = 4


class Unfold(Module):
    """im2col: sliding blocks of [N, C, H, W] as [N, C*kh*kw, L]."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, x: Tensor) -> Tensor:
        return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    """col2im: sums sliding blocks [N, C*kh*kw, L] back into [N, C, H, W]."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, x: Tensor) -> Tensor:
        return F.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)


class CosineSimilarity(Module):
    """Cosine similarity of x1 and x2 along `dim`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """p-norm distance between rows of x1 and x2."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class KLDivLoss(Module):
    """KL divergence with log-probabilities as input (torch.nn.KLDivLoss)."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__()
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MarginRankingLoss(Module):
    """max(0, -target * (x1 - x2) + margin)."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)


class TripletMarginLoss(Module):
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        self.margin, self.p, self.eps, self.swap, self.reduction = margin, p, eps, swap, reduction

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                     reduction=self.reduction)


class CosineEmbeddingLoss(Module):
    """1 - cos(x1, x2) for target 1, max(0, cos - margin) for target -1."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, self.margin, reduction=self.reduction)


class SoftMarginLoss(Module):
    """log(1 + exp(-target * input)), for targets of +1 / -1."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class Bilinear(Module):
    """y = x1^T A x2 + b, weight [out, in1, in2] (torch's layout and initialisation bound)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(_creation.empty(out_features, in1_features, in2_features, dtype=dtype,
                                                device=device))
        self.bias = Parameter(_creation.empty(out_features, dtype=dtype, device=device)) if bias else None
        bound = 1 / math.sqrt(in1_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        # [.., in1] x [out, in1, in2] x [.., in2] -> [.., out]
        t = M.matmul(x1.unsqueeze(-2).unsqueeze(-3), self.weight)  # [.., out, 1, in2]
        y = M.sum(M.mul(t.squeeze(-2), x2.unsqueeze(-2)), -1)
        return y if self.bias is None else M.add(y, self.bias)


class ParameterList(Module):
    """A list of Parameters registered on the module (names "0", "1", ...)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        for v in values or ():
            self.append(v)

    def append(self, value: Any) -> ParameterList:
        p = value if isinstance(value, Parameter) else Parameter(value)
        setattr(self, str(self._size), p)
        self._size += 1
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, i: int) -> Parameter:
        if not -self._size <= i < self._size:
            raise IndexError(f"index {i} is out of range")
        return getattr(self, str(i % self._size))  # type: ignore[no-any-return]

    def __setitem__(self, i: int, value: Any) -> None:
        setattr(self, str(i % self._size), value if isinstance(value, Parameter) else Parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Parameter]:
        return (self[i] for i in range(self._size))


class ParameterDict(Module):
    """A dict of Parameters registered on the module under their keys."""

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> None:
        super().__init__()
        self._keys: list[str] = []
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._keys:
            self._keys.append(key)
        setattr(self, key, value if isinstance(value, Parameter) else Parameter(value))

    def __getitem__(self, key: str) -> Parameter:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def keys(self) -> list[str]:
        return list(self._keys)

    def values(self) -> list[Parameter]:
        return [self[k] for k in self._keys]

    def items(self) -> list[tuple[str, Parameter]]:
        return [(k, self[k]) for k in self._keys]

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for k, v in pairs:
            self[k] = v

