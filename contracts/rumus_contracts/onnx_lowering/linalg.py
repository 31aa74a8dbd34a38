"""ONNX lowering of matmul (NumPy semantics on both sides)."""

from __future__ import annotations

from . import Lowering, one

LOWERINGS: dict[str, Lowering] = {"matmul": one("MatMul")}
