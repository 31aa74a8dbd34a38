"""Tensor methods of torch's that torch programs' habits need (nelement, uniform_, abs_, unfold, ...),
and the torch functions that are also Tensor methods; bound onto Tensor by _tensor_methods_torch."""

from __future__ import annotations

from typing import Any

from rumus_contracts import RumusError, ShapeError, parse_dtype

from . import _creation
from . import _math as M
from . import _views as V
from ._torch_functions import FUNCTIONS, _nd, _strided_view, addcdiv, addcmul, clamp_max, clamp_min, lerp, nan_to_num
from .tensor import Tensor

METHOD_NAMES = (
    "erf", "tan", "atan", "asin", "acos", "arctan", "arcsin", "arccos", "sinh", "cosh", "log10", "log2",
    "deg2rad", "rad2deg", "frac", "hypot", "xlogy", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv",
    "nan_to_num", "addmm", "baddbmm", "diagonal", "diag", "diag_embed", "trace", "kron", "cross", "dist",
    "unbind", "broadcast_to", "movedim", "moveaxis", "swapaxes", "swapdims", "tile", "rot90", "diff",
    "count_nonzero", "nansum", "nanmean",
)


def _no_cuda_tensor(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    from rumus_contracts import BackendUnavailable
    raise BackendUnavailable("Tensor.cuda(): CUDA is not a RUMUS backend; use .to('wgpu') for the GPU backend, or "
                             "keep the tensor where it is (rumus.cuda.is_available() is False)")


def _in_place(fn: Any) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from ._math import copy_
        return copy_(self, fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place {fn.__name__}: writes the result into this tensor."
    return method


def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """All slices of `size` along `dimension`, `step` apart, as a new last dim (a view, as torch's)."""
    d = _nd(dimension, self.ndim) if self.ndim else 0
    n = self.shape[d] if self.ndim else 1
    if size > n or size < 0 or step <= 0:
        raise ShapeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}; step must "
                         f"be > 0, got {step}")
    count = (n - size) // step + 1
    shape = (*self.shape[:d], count, *self.shape[d + 1:], size)
    strides = (*self._strides[:d], self._strides[d] * step, *self._strides[d + 1:], self._strides[d])
    return _strided_view(self, shape, strides, self._offset, "unfold")


def _uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator: Any = None) -> Tensor:
    from ._math import copy_
    r = _creation.rand(*self.shape, generator=generator, dtype=self.dtype, device=self.device)
    return copy_(self, M.add(M.mul(r, to - from_), from_))


def _normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
    from ._math import copy_
    r = _creation.randn(*self.shape, generator=generator, dtype=self.dtype, device=self.device)
    return copy_(self, M.add(M.mul(r, std), mean))


def _bernoulli_(self: Tensor, p: float = 0.5, *, generator: Any = None) -> Tensor:
    from ._math import copy_
    r = _creation.rand(*self.shape, generator=generator, device=self.device)
    return copy_(self, M.lt(r, p).to(self.dtype))


def _exponential_(self: Tensor, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
    from ._math import copy_
    r = _creation.rand(*self.shape, generator=generator, dtype=self.dtype, device=self.device)
    return copy_(self, M.div(M.neg(M.log1p(M.neg(r))), lambd))


def _random_(self: Tensor, from_: int = 0, to: int | None = None, *, generator: Any = None) -> Tensor:
    from ._math import copy_
    if to is None:
        from_, to = 0, from_ if from_ else (2 ** 24 if self.dtype.is_floating else 2 ** 31 - 1)
    r = _creation.randint(from_, to, self.shape, generator=generator, device=self.device)
    return copy_(self, r.to(self.dtype))


def _argwhere(self: Tensor) -> Tensor:
    from ._torch_api import nonzero
    return nonzero(self)  # type: ignore[no-any-return]


METHODS: dict[str, Any] = {
    **{name: FUNCTIONS[name] for name in METHOD_NAMES},
    "nelement": lambda self: self.numel(), "ndimension": lambda self: self.ndim,
    "is_cuda": property(lambda self: False), "byte": lambda self: self.to(parse_dtype("uint8")),
    "char": lambda self: self.to(parse_dtype("int8")), "short": lambda self: self.to(parse_dtype("int16")),
    "cuda": _no_cuda_tensor, "pin_memory": lambda self, device=None: self, "is_pinned": lambda self: False,
    "t_": lambda self: _in_place_transpose(self), "unfold": unfold, "select": V.select,
    "uniform_": _uniform_, "normal_": _normal_, "bernoulli_": _bernoulli_, "exponential_": _exponential_,
    "random_": _random_, "argwhere": _argwhere,
    "abs_": _in_place(M.abs), "log_": _in_place(M.log), "sign_": _in_place(M.sign), "floor_": _in_place(M.floor),
    "ceil_": _in_place(M.ceil), "round_": _in_place(M.round), "sigmoid_": _in_place(M.sigmoid),
    "tanh_": _in_place(M.tanh), "clip_": _in_place(M.clamp), "clamp_min_": _in_place(clamp_min),
    "clamp_max_": _in_place(clamp_max), "lerp_": _in_place(lerp), "addcmul_": _in_place(addcmul),
    "addcdiv_": _in_place(addcdiv), "nan_to_num_": _in_place(nan_to_num),
}


def _in_place_transpose(self: Tensor) -> Tensor:
    raise RumusError("t_(): in-place transposition changes a tensor's layout in place, which RUMUS views do not "
                     "do; use x = x.t()")
