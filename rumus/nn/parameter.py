"""Parameter: a Tensor that a Module registers automatically when assigned as an attribute."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor, _init

# rumus.nn star-imports these.
__all__ = ["Parameter", "Buffer"]


class Parameter(Tensor):
    """A tensor that a Module registers as a learnable parameter (requires_grad=True by default)."""
    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        from .._creation import empty
        src = data if data is not None else empty(0)
        p: Parameter = object.__new__(cls)
        _init(p, src._storage, src.shape, src._strides, src._offset)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto: Any) -> Any:
        # by value, as torch pickles a Parameter: the class and requires_grad survive, .grad does not
        return (_rebuild_parameter, (self.detach(), self.requires_grad))

    def _copy_as_leaf(self) -> Tensor:
        return Parameter(self.detach().clone(), self.requires_grad)


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


class Buffer(Tensor):
    """Marker used as `self.x = Buffer(t)` to register a buffer, like torch.nn.Buffer."""

    __slots__ = ("persistent",)
    persistent: bool

    def __new__(cls, data: Tensor, persistent: bool = True) -> Buffer:
        b: Buffer = object.__new__(cls)
        _init(b, data._storage, data.shape, data._strides, data._offset)
        b.persistent = persistent
        return b

    def __init__(self, data: Tensor, persistent: bool = True) -> None:
        pass

    def __reduce_ex__(self, proto: Any) -> Any:
        return (Buffer, (self.detach(), self.persistent))

    def _copy_as_leaf(self) -> Tensor:
        return Buffer(self.detach().clone(), self.persistent)


def weight_and_bias(weight_shape: tuple[int, ...], bias_size: int | None, device: Any,
                    dtype: Any) -> tuple[Parameter, Parameter | None]:
    """A Linear or Conv layer's parameters, uninitialised (its reset_parameters fills them): the weight, and a
    bias of bias_size elements, or None."""
    from .._creation import empty
    weight = Parameter(empty(*weight_shape, device=device, dtype=dtype))
    return weight, None if bias_size is None else Parameter(empty(bias_size, device=device, dtype=dtype))
