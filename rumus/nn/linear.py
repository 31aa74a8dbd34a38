"""Linear (weight [out, in], PyTorch's init), Identity, Flatten."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter, weight_and_bias

# rumus.nn star-imports these.
__all__ = ["Linear", "Identity", "Flatten"]


class Linear(Module):
    """y = x @ weight.T + bias, weight [out_features, in_features] (PyTorch's layout and initialisation)."""
    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight, bias_param = weight_and_bias((out_features, in_features), out_features if bias else None,
                                                  device, dtype)
        self.bias: Parameter | None
        self.register_parameter("bias", bias_param)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.layer_default_(self.weight, self.bias)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input unchanged (a placeholder in a Sequential)."""
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class Flatten(Module):
    """Flattens dims `start_dim` to `end_dim` (by default all but the batch dim)."""
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
