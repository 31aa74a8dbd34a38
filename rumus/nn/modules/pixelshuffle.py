"""torch.nn.modules.pixelshuffle's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "PixelShuffle", "PixelUnshuffle",
])
