"""torch.nn.modules.utils's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "consume_prefix_in_state_dict_if_present",
])
