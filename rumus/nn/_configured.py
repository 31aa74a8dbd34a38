"""Layers that are one functional call with their constructor's settings (LeakyReLU, Hardtanh, ELU,
AdaptiveAvgPool2d, ...): forward passes the settings named in `_attrs`, in that order, after the input,
and extra_repr lists them as PyTorch prints them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..tensor import Tensor
from .module import Module


class Configured(Module):
    _fn: ClassVar[Callable[..., Tensor]]
    _attrs: ClassVar[tuple[str, ...]] = ()

    def forward(self, x: Tensor) -> Tensor:
        return type(self)._fn(x, *[getattr(self, a) for a in self._attrs])

    def extra_repr(self) -> str:
        values: list[Any] = [getattr(self, a) for a in self._attrs]
        return ", ".join(f"{a}={v}" for a, v in zip(self._attrs, values))
