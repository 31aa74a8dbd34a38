"""rumus.nn.utils: gradient clipping and variable-length sequences (like torch.nn.utils)."""

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "rnn"]
