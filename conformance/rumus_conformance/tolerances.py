"""Comparison tolerances: PyTorch's assert_close table, widened per op only with a written reason."""

from __future__ import annotations

from rumus_contracts import DType, OpSchema

FORWARD: dict[str, tuple[float, float]] = {
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}

# Gradients are compared with central finite differences of the float64 reference: the difference
# quotient itself carries ~1e-9 relative error, and a backward pass chains several rounded kernels.
GRADIENT: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-5, 1e-6),
    "float16": (1e-2, 1e-2),
    # 8x float16's: bfloat16 keeps 3 significand bits fewer. A backward pass rounds every intermediate to
    # bfloat16 (so does PyTorch's autograd: pow's broadcast gradient on the CPU gives torch's bits exactly,
    # 6% off the float64 value where three rounded terms of ~40 cancel to 41)
    "bfloat16": (8e-2, 8e-2),
}


def forward_tolerance(schema: OpSchema, dtype: DType) -> tuple[float, float]:
    """(rtol, atol); integers, bools and fixed-point are exact (0, 0)."""
    if not dtype.is_floating:
        return 0.0, 0.0
    return schema.tolerance.get(dtype.name, FORWARD[dtype.name])


def gradient_tolerance(schema: OpSchema, dtype: DType) -> tuple[float, float]:
    base = GRADIENT[dtype.name]
    own = schema.tolerance.get(dtype.name)
    if own is None:
        return base
    return max(base[0], own[0]), max(base[1], own[1])
