"""The convolution, pooling and normalization layers, re-exported by rumus.nn."""

from .conv import Conv1d, Conv2d, ConvTranspose2d
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d

__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d", "ConvTranspose2d",
           "GroupNorm", "LayerNorm", "MaxPool2d", "RMSNorm"]
