"""Quantized inference: q8 blocks (SPEC C) and int4 groups (SPEC D), with RTN, GPTQ and AWQ quantizers.

    import rumus as rm
    rm.quant.quantize(model, "int4", group_size=128, method="gptq", calib=[x1, x2])
    rm.quant.save_quantized(model, "model.q.safetensors")
"""

from __future__ import annotations

from .qlinear import QLinear
from .quantize import METHODS, quantize
from .storage import load_quantized, save_quantized

__all__ = ["METHODS", "QLinear", "load_quantized", "quantize", "save_quantized"]
