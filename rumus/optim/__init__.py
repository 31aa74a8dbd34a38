"""Optimizers (PyTorch's names and update rules); step() drains its parameters' gradients."""

from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
