"""FixedLinear and FixedReLU: the layers of a fixed-point model (weights [in, out], one scale)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import ShapeError, fixed_i16
from rumus_contracts.ops.fixed import OVERFLOW, ROUNDING

from ..tensor import Tensor
from . import functional as F
from .tensor import raw_int16, require_fixed, scale_log2_of, tensor


class FixedLinear:
    """y = requantize(x @ weight + (bias << s), s) with weight [in, out] and bias [out] | None.

    `FixedLinear(weight, bias, scale_log2)` takes raw int16 values (nested lists or integer arrays);
    `FixedLinear.from_parts(weight_tensor, bias_tensor)` takes fixed-point tensors.
    """

    rounding = ROUNDING
    overflow = OVERFLOW

    def __init__(self, weight: Any, bias: Any | None, scale_log2: int) -> None:
        fixed_i16(scale_log2)
        w = raw_int16(weight, "weights")
        if w.ndim != 2:
            raise ShapeError(f"FixedLinear: weight must be 2-D [in, out], got shape {w.shape}")
        b = None if bias is None else raw_int16(bias, "biases")
        self._set(tensor(w, w.shape, scale_log2), None if b is None else tensor(b, b.shape, scale_log2))

    @classmethod
    def from_parts(cls, weight: Tensor, bias: Tensor | None) -> FixedLinear:
        """A layer over existing fixed-point tensors: weight 2-D, bias 1-D, contiguous, one scale."""
        layer = cls.__new__(cls)
        layer._set(weight, bias)
        return layer

    def _set(self, weight: Tensor, bias: Tensor | None) -> None:
        require_fixed(weight, "FixedLinear weight")
        s = scale_log2_of(weight)
        if weight.ndim != 2:
            raise ShapeError(f"FixedLinear: weight must be 2-D [in, out], got shape {weight.shape}")
        if not weight.is_contiguous():
            raise ShapeError(f"FixedLinear: weight must be contiguous (strides {weight.stride()} for shape "
                             f"{weight.shape}); rebuild it with rumus.fixed.tensor(w.fixed_i16_data(), ...)")
        if bias is not None:
            require_fixed(bias, "FixedLinear bias", s)
            if bias.shape != (weight.shape[1],):
                raise ShapeError(f"FixedLinear: bias must be 1-D of out_features ({weight.shape[1]},), "
                                 f"got shape {bias.shape}")
            if not bias.is_contiguous():
                raise ShapeError("FixedLinear: bias must be contiguous; rebuild it with rumus.fixed.tensor")
        self.weight, self.bias, self.scale_log2 = weight, bias, s
        self.in_features, self.out_features = weight.shape

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    forward = __call__

    def weight_values(self) -> np.ndarray:
        """The raw int16 weights, [in, out]."""
        return self.weight.fixed_i16_data()

    def bias_values(self) -> np.ndarray | None:
        return None if self.bias is None else self.bias.fixed_i16_data()

    def __repr__(self) -> str:
        return (f"FixedLinear(in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, scale_log2={self.scale_log2})")


class FixedReLU:
    """max(q, 0), dtype kept. Has no scale of its own."""

    def __call__(self, x: Tensor) -> Tensor:
        return F.relu(x)

    forward = __call__

    def __repr__(self) -> str:
        return "FixedReLU()"


FixedLayer = FixedLinear | FixedReLU
