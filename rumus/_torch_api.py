"""PyTorch spellings the core lacks under those names: dtype aliases (rumus.float, rumus.long ...), device
queries for programs written against CUDA (rumus.cuda.is_available() is False, rumus.accelerator), and the
dtype rules PyTorch users rely on — bool/int sums are int64, where(c, 1, 0) is int64.

Programs branch on `torch.cuda.is_available()` to choose a device; answering False sends them down their
CPU path, which runs on rumus's default device (RUMUS_BACKEND picks it). None of this changes the core's
own rules: it is a translation layer over them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rumus_contracts import Device, bool_, float16, float32, float64, int16, int32, int64, parse_dtype

from . import _math as M
from . import _runtime
from ._creation import from_numpy, tensor
from .tensor import Tensor

DTYPE_ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
                 "short": int16, "float_": float32}


def sum(x: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """PyTorch's rule: summing bool counts (int64), integer sums widen to int64."""
    if dtype is None and x.dtype == bool_:
        dtype = int64
    return M.sum(x, dim, keepdim, dtype)


def prod(x: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """PyTorch's rule: the product of bools is an int64 (0 or 1), as integer products widen to int64."""
    if dtype is not None:
        x = x.to(parse_dtype(dtype))
    elif x.dtype == bool_:
        x = x.to(int64)
    return M.prod(x, dim, keepdim)


def where(condition: Tensor, input: Any = None, other: Any = None) -> Any:
    """where(c, a, b) with PyTorch's result dtype for Python scalars (ints -> int64, bools -> bool); the
    one-argument form where(c) is nonzero(c, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        kinds = {type(input), type(other)}
        if kinds == {bool}:  # the where kernel computes in a numeric dtype; bool choices are logic
            c = condition.to(bool_)
            if input == other:
                return M.logical_or(c, True) if input else M.logical_and(c, False)
            return M.logical_or(c, False) if input else M.logical_not(c)
        dt = int64 if kinds <= {int, bool} else None
        if dt is not None:
            like = condition.to(dt)
            return M.where(condition, M._t(input, like), M._t(other, like))
    if _both_bool(input, other):  # bool choices stay bool (torch), computed as logic
        c = condition.to(bool_)
        a = input if isinstance(input, Tensor) else M._t(bool(input), other)
        b = other if isinstance(other, Tensor) else M._t(bool(other), input)
        return M.logical_or(M.logical_and(c, a), M.logical_and(M.logical_not(c), b))
    return M.where(condition, input, other)


def _both_bool(a: Any, b: Any) -> bool:
    def is_bool(v: Any) -> bool:
        return isinstance(v, bool) or isinstance(v, Tensor) and v.dtype == bool_
    return is_bool(a) and is_bool(b) and (isinstance(a, Tensor) or isinstance(b, Tensor))


def nonzero(x: Tensor, as_tuple: bool = False) -> Any:
    """Indices of the non-zero elements. Data-dependent size: computed on the host (a sync), like PyTorch."""
    import numpy as np
    idx = np.nonzero(x.numpy())
    if as_tuple:
        return tuple(from_numpy(i.astype(np.int64), device=x.device) for i in idx)
    return from_numpy(np.stack(idx, 1).astype(np.int64).reshape(-1, x.ndim), device=x.device)


def equal(a: Tensor, b: Tensor) -> bool:
    """True when both have the same shape and the same values (PyTorch's torch.equal)."""
    return tuple(a.shape) == tuple(b.shape) and bool(M.all(M.eq(a, b)))


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`data` itself when it already is a tensor of that dtype/device, else a new tensor."""
    if isinstance(data, Tensor):
        out = data
        if dtype is not None and out.dtype != parse_dtype(dtype):
            out = out.to(dtype=parse_dtype(dtype))
        if device is not None and out.device != Device.parse(device):
            out = out.to(device)
        return out
    return tensor(data, dtype=dtype, device=device)


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(x: Tensor) -> bool:
    return x.dtype.is_floating


def get_default_dtype() -> Any:
    return float32


# ---- device queries --------------------------------------------------------------------------------------
from . import backends as backends  # noqa: E402  (torch.backends' path: accepted flags)
from . import cuda as cuda  # noqa: E402  (torch.cuda's path: no CUDA device)
from .backends import mps as mps  # noqa: E402


def _accelerator_available() -> bool:
    """True when the default device is not the CPU (e.g. RUMUS_BACKEND=wgpu)."""
    return _runtime.default_device().backend != "cpu"


accelerator = SimpleNamespace(
    is_available=_accelerator_available,
    current_accelerator=lambda check_available=False: (
        _runtime.default_device() if _accelerator_available() else None),
    device_count=lambda: 1 if _accelerator_available() else 0,
    synchronize=lambda *a: _runtime.backend(_runtime.default_device().backend).synchronize(
        _runtime.default_device()),
)


def get_num_threads() -> int:
    import os

    from rumus_contracts import config
    threads = config.get("RUMUS_NUM_THREADS")
    return threads if isinstance(threads, int) else os.cpu_count() or 1


def set_num_threads(n: int) -> None:
    """Accepted for PyTorch habits; the CPU backend's thread budget is RUMUS_NUM_THREADS at start-up."""
