"""torch.nn.modules.linear's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "Bilinear", "Identity", "LazyLinear", "Linear",
])
