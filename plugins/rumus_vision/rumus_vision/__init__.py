"""rumus-vision: direct convolution kernels (C and WGSL) for the core's conv ops, image transforms, and
ResNet-18 with torchvision's parameter names. Installed as a separate distribution and found by RUMUS
through the entry point `vision` in group `rumus`; the core never imports it."""

from .choice import DIRECT_MAX_GROUP_CHANNELS, conv_mode, conv_mode_as, set_conv_mode

__all__ = ["DIRECT_MAX_GROUP_CHANNELS", "conv_mode", "conv_mode_as", "set_conv_mode"]
