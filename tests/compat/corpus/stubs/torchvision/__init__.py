"""Stand-in for torchvision: the datasets give small random tensors, transforms the basics.

Written against whatever `torch` is (torch itself, or rumus under the harness's import renaming)."""

from . import datasets, transforms

__all__ = ["datasets", "transforms"]
