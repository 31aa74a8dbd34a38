"""File formats: safetensors (ONNX export arrives with its own issue)."""

from .safetensors import atomic_write, load_file, save_file

__all__ = ["atomic_write", "load_file", "save_file"]
