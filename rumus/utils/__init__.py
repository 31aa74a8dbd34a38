"""rumus.utils: activation checkpointing (rumus.utils.checkpoint(fn, *args), like torch.utils.checkpoint)."""

from .checkpoint import checkpoint, checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential"]
