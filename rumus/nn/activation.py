"""Activation modules."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from ._configured import Configured
from .module import Module

# rumus.nn star-imports these: a layer named here is public as nn.<name>.
__all__ = [
    "ReLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "GELU", "SiLU", "LeakyReLU", "Softplus", "ELU", "ReLU6",
    "Mish", "Softsign", "Hardswish", "Hardsigmoid", "SELU", "CELU", "Tanhshrink", "LogSigmoid", "Hardtanh",
]


class _Activation(Module):
    """An activation without parameters: forward applies the class's `_fn` to the input."""
    _fn = staticmethod(F.sigmoid)

    def forward(self, x: Tensor) -> Tensor:
        return type(self)._fn(x)


class _InplaceActivation(_Activation):
    """One whose PyTorch signature takes `inplace`: accepted, and the result is a new tensor all the same."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()


class _AlphaActivation(Configured):
    """forward is the class's `_fn(x, alpha)` (ELU, CELU)."""
    _fn = staticmethod(F.elu)
    _attrs = ("alpha",)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha


class _AlongDim(Module):
    """forward is the class's `_fn(x, dim)` (Softmax, LogSoftmax)."""
    _fn = staticmethod(F.softmax)

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return type(self)._fn(x, self.dim)


class ReLU(_InplaceActivation):
    """Applies max(x, 0) elementwise."""
    _fn = staticmethod(F.relu)


class Sigmoid(_Activation):
    """Applies the logistic function elementwise."""
    _fn = staticmethod(F.sigmoid)


class Tanh(_Activation):
    """Applies tanh elementwise."""
    _fn = staticmethod(F.tanh)


class Softmax(_AlongDim):
    """Applies softmax along `dim`."""
    _fn = staticmethod(F.softmax)


class LogSoftmax(_AlongDim):
    """Applies log(softmax(x)) along `dim`."""
    _fn = staticmethod(F.log_softmax)


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses PyTorch's tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    """Applies x * sigmoid(x) elementwise (also called swish)."""
    _fn = staticmethod(F.silu)


class LeakyReLU(Configured):
    """Applies x if x >= 0 else negative_slope * x, elementwise."""
    _fn = staticmethod(F.leaky_relu)
    _attrs = ("negative_slope",)

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope


class Softplus(Configured):
    """Applies log(1 + e ** (beta * x)) / beta elementwise (linear above `threshold`)."""
    _fn = staticmethod(F.softplus)
    _attrs = ("beta", "threshold")

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold


class ELU(_AlphaActivation):
    """Applies x if x > 0 else alpha * (e ** x - 1), elementwise."""
    _fn = staticmethod(F.elu)


class ReLU6(_InplaceActivation):
    """Applies min(max(x, 0), 6) elementwise."""
    _fn = staticmethod(F.relu6)


class Mish(_InplaceActivation):
    """Applies x * tanh(softplus(x)) elementwise."""
    _fn = staticmethod(F.mish)


class Softsign(_Activation):
    """Applies x / (1 + |x|) elementwise."""
    _fn = staticmethod(F.softsign)


class Hardswish(_InplaceActivation):
    """Applies x * relu6(x + 3) / 6 elementwise."""
    _fn = staticmethod(F.hardswish)


class Hardsigmoid(_InplaceActivation):
    """Applies relu6(x + 3) / 6 elementwise."""
    _fn = staticmethod(F.hardsigmoid)


class SELU(_InplaceActivation):
    """Applies the self-normalising ELU (scale 1.0507, alpha 1.6733) elementwise."""
    _fn = staticmethod(F.selu)


class CELU(_AlphaActivation):
    """Applies max(0, x) + min(0, alpha * (e ** (x / alpha) - 1)) elementwise."""
    _fn = staticmethod(F.celu)


class Tanhshrink(_Activation):
    """Applies x - tanh(x) elementwise."""
    _fn = staticmethod(F.tanhshrink)


class LogSigmoid(_Activation):
    """Applies log(sigmoid(x)) elementwise, computed stably."""
    _fn = staticmethod(F.logsigmoid)


class Hardtanh(Configured):
    """Applies x clamped to [min_val, max_val] elementwise."""
    _fn = staticmethod(F.hardtanh)
    _attrs = ("min_val", "max_val")

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.min_val, self.max_val = min_val, max_val
