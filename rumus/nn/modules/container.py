"""torch.nn.modules.container's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
])
