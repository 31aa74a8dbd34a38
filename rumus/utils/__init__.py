"""rumus.utils: activation checkpointing (rumus.utils.checkpoint(fn, *args), like torch.utils.checkpoint),
`rumus.utils.data` (torch.utils.data's path to the data engine) and hook handles."""

from . import data, hooks
from .checkpoint import checkpoint, checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential", "data", "hooks"]
