"""File formats: safetensors (ONNX export arrives with its own issue)."""

from .checkpoint import load, save
from .safetensors import atomic_write, load_file, save_file

__all__ = ["atomic_write", "load", "load_file", "save", "save_file"]
