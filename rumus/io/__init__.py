"""File formats: safetensors (ONNX export arrives with its own issue), atomic saves, hardened JSON."""

from .checkpoint import load, save
from .files import AtomicFile, atomic_write
from .safetensors import load_file, save_file

__all__ = ["AtomicFile", "atomic_write", "load", "load_file", "save", "save_file"]
