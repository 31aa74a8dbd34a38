"""torch.nn.modules.upsampling's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
])
