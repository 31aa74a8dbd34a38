"""QLinear: a Linear whose weight is q8 blocks (SPEC C) or int4 groups (SPEC D), inference only.

The weight is kept as [K, N] = [in, out] packed words (the transpose of nn.Linear's [out, in]), and the
matmul kernels dequantise it in registers. `input_scale` (AWQ's 1/s per input channel) multiplies x
first when the scale could not be folded into the preceding op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import DType, int4, q8
from rumus_contracts.ops import quant as layout

from .. import ops
from .._creation import from_storage, tensor
from ..autograd.function import Function, FunctionCtx
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..tensor import Tensor


class _QuantMatmul(Function):
    """x @ W with W packed: the weight is frozen, so backward gives only the input gradient (SPEC D),
    grad @ dequant(W)^T; the float weight exists only for that product, during backward."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, layer: QLinear) -> Tensor:
        ctx.layer = layer  # type: ignore[attr-defined]
        if layer.scheme == "q8":
            return ops.q8_linear(x, layer.qweight, n=layer.out_features)
        return ops.int4_linear(x, layer.qweight, layer.scales, layer.zeros)

    @staticmethod
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor, None]:
        layer: QLinear = ctx.layer  # type: ignore[attr-defined]
        return grad @ layer.dequantized_weight(), None


class QLinear(Module):
    """y = x @ dequant(W) + b with W packed; built by `from_float_weight` or by `rumus.quant.quantize`."""

    def __init__(self, in_features: int, out_features: int, scheme: str, size: int, words: Tensor,
                 scales: Tensor | None = None, zeros: Tensor | None = None, bias: Tensor | None = None,
                 input_scale: Tensor | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features, self.scheme, self.size = in_features, out_features, scheme, size
        self.register_buffer("qweight", words)
        self.register_buffer("scales", scales)
        self.register_buffer("zeros", zeros)
        self.register_buffer("input_scale", input_scale)
        self.bias: Parameter | None
        if bias is not None:
            self.bias = Parameter(bias.detach())
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_linear(cls, linear: Any, group_size: int = 128, scheme: str = "int4") -> QLinear:
        """Round-to-nearest quantization of an nn.Linear (weights frozen, bias kept trainable)."""
        w = np.ascontiguousarray(linear.weight.detach().numpy().T.astype(np.float32))
        return cls.from_codes(scheme, group_size, w, bias=linear.bias, device=linear.weight.device)

    @staticmethod
    def dtype_for(scheme: str, size: int) -> DType:
        return q8(size) if scheme == "q8" else int4(size)

    @classmethod
    def from_codes(cls, scheme: str, size: int, w_kn: np.ndarray | None, codes: np.ndarray | None = None,
                   scales: np.ndarray | None = None, zeros: np.ndarray | None = None, bias: Tensor | None = None,
                   input_scale: np.ndarray | None = None, device: Any = None) -> QLinear:
        """q8: pack the float [K, N] weight; int4: pack given codes/scales/zeros (GPTQ, AWQ) or RTN of w_kn."""
        if scheme == "q8":
            assert w_kn is not None
            k, n = w_kn.shape
            words = from_storage(layout.q8_pack(w_kn, size), q8(size), device)
            st = zt = None
        elif scheme == "int4":
            if codes is None:
                assert w_kn is not None
                scales, zeros = layout.int4_params(w_kn, size)
                codes = layout.int4_codes(w_kn, scales, zeros, size)
            assert scales is not None and zeros is not None
            k, n = codes.shape
            words = from_storage(layout.int4_pack_codes(codes, size), int4(size), device)
            st, zt = tensor(np.asarray(scales, np.float32), device=device), tensor(np.asarray(zeros, np.float32),
                                                                                  device=device)
        else:
            raise ValueError(f"unknown scheme {scheme!r}; use 'q8' or 'int4'")
        inv = None if input_scale is None else tensor(np.asarray(input_scale, np.float32), device=device)
        return cls(k, n, scheme, size, words, st, zt, bias, inv)

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        if self.input_scale is not None:
            x2 = x2 * self.input_scale
        y: Tensor = _QuantMatmul.apply(x2, self)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*lead, self.out_features)

    def dequantized_weight(self) -> Tensor:
        """The float [out, in] weight this layer computes with (for tests and inspection)."""
        if self.scheme == "q8":
            w = ops.q8_dequantize(self.qweight, k=self.in_features, n=self.out_features)
        else:
            w = ops.int4_dequantize(self.qweight, self.scales, self.zeros, k=self.in_features)
        return w.mT

    def weight_bytes(self) -> int:
        total = int(self.qweight.numel()) * 4
        for t in (self.scales, self.zeros):
            total += 0 if t is None else int(t.numel()) * 4
        return total

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, scheme={self.scheme}, "
                f"size={self.size}, bias={self.bias is not None}")
