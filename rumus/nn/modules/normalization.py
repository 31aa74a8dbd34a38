"""torch.nn.modules.normalization's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "LocalResponseNorm", "CrossMapLRN2d", "LayerNorm", "GroupNorm", "RMSNorm",
])
