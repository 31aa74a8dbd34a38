"""torch.nn.modules.conv's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d",
    "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
])
