"""File formats: safetensors (ONNX export arrives with its own issue), atomic saves, hardened JSON."""

from .files import AtomicFile, atomic_write
from .safetensors import load_file, save_file

__all__ = ["AtomicFile", "atomic_write", "load_file", "save_file"]
