"""RUMUS CPU backend: numpy buffers, C kernels compiled by cffi (csrc/), GEMM through numpy's BLAS.

Importing this package loads nothing compiled; `CpuBackend` (or the plugin's kernels) does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CpuBackend"]


def __getattr__(name: str) -> Any:
    if name == "CpuBackend":
        from .backend import CpuBackend
        return CpuBackend
    raise AttributeError(f"module 'rumus_cpu' has no attribute {name!r}")
