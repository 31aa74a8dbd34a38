"""torch's dtype information and legacy typed constructors: finfo, iinfo, set_default_dtype, and
FloatTensor-style classes (torch.FloatTensor(2, 3), torch.LongTensor([1, 2]))."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import DTypeError, bool_, float32, parse_dtype

from . import _creation
from .tensor import Tensor

LEGACY_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
                "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor"}


def _legacy(dtype_name: str) -> Any:
    dt = parse_dtype(dtype_name)

    def make(*args: Any, device: Any = None) -> Tensor:
        if len(args) == 1 and not isinstance(args[0], int):  # data (a list, an array, a tensor)
            data = args[0]
            if isinstance(data, Tensor):
                return data.to(dt)
            return _creation.tensor(data, dtype=dt, device=device)
        if any(not isinstance(a, int) for a in args):
            raise TypeError(f"{name}(): expected sizes (ints) or one sequence of data, got {args!r}")
        return _creation.zeros(*args, dtype=dt, device=device) if args else _creation.empty(0, dtype=dt)

    name = LEGACY_NAMES[dtype_name]
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"torch.{name}: {name}(*sizes) or {name}(data). New code writes rumus.tensor(data, "
                    f"dtype=rumus.{dtype_name}) or rumus.zeros(*sizes, dtype=...); sizes give zeros here "
                    f"(torch leaves them uninitialised).")
    return make


LEGACY = {f.__name__: f for f in (_legacy(n) for n in (
    "float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool", "bfloat16"))}


class finfo:  # noqa: N801  (torch's name)
    """torch.finfo(dtype): bits, eps, max, min, tiny (smallest normal), resolution of a float dtype."""

    def __init__(self, dtype: Any = None) -> None:
        dt = parse_dtype(dtype or float32)
        if not dt.is_floating:
            raise DTypeError(f"finfo: {dt} is not a floating-point dtype; use iinfo")
        info = np.finfo(np.float32) if dt.name == "bfloat16" else np.finfo(np.dtype(dt.name))
        self.dtype, self.bits = dt.name, dt.itemsize * 8
        if dt.name == "bfloat16":  # float32's exponent with 8 significand bits
            self.eps, self.max, self.min = 2.0 ** -7, 3.3895313892515355e38, -3.3895313892515355e38
            self.tiny = self.smallest_normal = float(info.tiny)
            self.resolution = 0.01
        else:
            self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
            self.tiny = self.smallest_normal = float(info.tiny)
            self.resolution = float(info.resolution)

    def __repr__(self) -> str:
        return f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, eps={self.eps}, " \
               f"tiny={self.tiny}, dtype={self.dtype})"


class iinfo:  # noqa: N801  (torch's name)
    """torch.iinfo(dtype): bits, min, max of an integer dtype."""

    def __init__(self, dtype: Any) -> None:
        dt = parse_dtype(dtype)
        if dt.is_floating or dt == bool_:
            raise DTypeError(f"iinfo: {dt} is not an integer dtype; use finfo")
        info = np.iinfo(np.dtype(dt.name))
        self.dtype, self.bits, self.min, self.max = dt.name, info.bits, int(info.min), int(info.max)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def set_default_dtype(d: Any) -> None:
    """Only float32 (the default) is accepted: every factory's float default is float32."""
    if parse_dtype(d) != float32:
        raise DTypeError(f"set_default_dtype({d}): RUMUS's default float dtype is float32; pass dtype=... to "
                         f"factories (rumus.zeros(..., dtype=rumus.float64)) or convert with .double()")
