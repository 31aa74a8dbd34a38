"""Creation functions; every one takes dtype= and device= (float32 and RUMUS_BACKEND's device by default)."""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from rumus_contracts import (
    ArgumentTypeError, Device, DType, DTypeError, OutOfMemory, RumusError, ShapeError, float32, int64, parse_dtype,
)
from rumus_contracts import bool_ as rbool
from rumus_contracts.dtype import from_numpy_dtype

from . import _runtime
from ._storage import Storage
from .random import Generator, default_generator
from ._tensor_base import Tensor, make_tensor
from .ops import get as _op

# The names rumus.* re-exports (its __init__ star-imports them).
__all__ = [
    "arange", "empty", "empty_like", "eye", "from_numpy", "full", "full_like", "linspace", "ones", "ones_like", "rand",
    "rand_like", "randint", "randn", "randn_like", "randperm", "tensor", "zeros", "zeros_like",
]


def _device(device: Any) -> Device:
    return _runtime.default_device() if device is None else Device.parse(device)


def _size_arg(size: tuple[Any, ...], kw: dict[str, Any], where: str) -> tuple[Any, ...]:
    """torch's `size=` keyword (zeros(size=(2, 3))) beside the positional sizes; any other keyword is refused."""
    if "size" in kw:
        if size:
            raise ArgumentTypeError(f"{where}() got sizes both positionally and as size=")
        size = (kw.pop("size"),)
    if kw:
        raise ArgumentTypeError(f"{where}() got an unexpected keyword argument {next(iter(kw))!r}")
    return size


def _size_int(value: Any, what: str, where: str) -> int:
    """An int (or anything with __index__, as PyTorch accepts); floats, strings, ... are refused."""
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{where}: {what} must be an integer, got {type(value).__name__} {value!r}") from None


def _shape(size: tuple[Any, ...], where: str = "size") -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(_size_int(s, "every dimension of a size", where) for s in size)
    if any(s < 0 for s in shape):
        raise ShapeError(f"{where}: negative dimension in size {shape}; dimensions must be >= 0")
    return shape


_T = TypeVar("_T")


def _nbytes(shape: Sequence[int], dtype: DType) -> int:
    return math.prod(shape) * np.dtype(dtype.numpy).itemsize


@contextmanager
def _allocating(shape: Sequence[int], dtype: DType) -> Iterator[None]:
    """numpy's MemoryError (and its ValueError for sizes past its address space) as OutOfMemory naming
    the shape, the dtype and the bytes asked for."""
    def fail() -> OutOfMemory:
        return OutOfMemory(f"cannot allocate a tensor of shape {tuple(shape)} and dtype {dtype}: "
                           f"{_nbytes(shape, dtype)} bytes; use a smaller size")
    if _nbytes(shape, dtype) >= 1 << 62:  # numpy refuses these with ValueError before trying
        raise fail()
    try:
        yield
    except MemoryError:
        raise fail() from None
    except ValueError as exc:
        if isinstance(exc, RumusError) or "too big" not in str(exc) and "exceeds" not in str(exc):
            raise
        raise fail() from None


def host_memory_bytes() -> int:
    """This machine's physical memory: no single buffer larger than it can ever be allocated."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # no sysconf: numpy's own MemoryError stays the guard
        return 1 << 62


def check_size(what: str, shape: Sequence[int], itemsize: int) -> None:
    """Refuse, before any work, a result (or a host temporary) of `shape` x `itemsize` bytes that no
    allocation could hold: an op whose output size comes from its arguments checks it here, so a huge
    argument is OutOfMemory naming the size, never numpy's MemoryError from deep inside the op."""
    nbytes = math.prod(int(d) for d in shape) * int(itemsize)
    limit = host_memory_bytes()
    if nbytes > limit:
        raise OutOfMemory(f"{what}: the result of shape {tuple(int(d) for d in shape)} needs {nbytes} bytes "
                          f"({nbytes / 2**30:.4g} GiB), more than this machine's {limit / 2**30:.4g} GiB of memory; "
                          f"use smaller sizes")


@contextmanager
def host_memory(what: str) -> Iterator[None]:
    """numpy's MemoryError from a host temporary the size check let through, as OutOfMemory."""
    try:
        yield
    except MemoryError:
        raise OutOfMemory(f"{what}: out of host memory; use smaller sizes") from None


def _sized(shape: Sequence[int], dtype: DType, make: Callable[[], _T]) -> _T:
    with _allocating(shape, dtype):
        return make()


def _bfloat16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even; a NaN stays NaN (quiet bit set: rounding its
    payload could carry into an infinity or the sign), as the CPU kernels do (csrc/internal/half.h)."""
    f32 = np.asarray(a, dtype=np.float32, order="C")
    bits = f32.view(np.uint32)
    rounded = np.where(np.isnan(f32), bits | 0x400000, bits + 0x7FFF + ((bits >> 16) & 1))
    return (rounded >> 16).astype(np.uint16)


def from_host(array: np.ndarray, dtype: DType, device: Device, requires_grad: bool = False) -> Tensor:
    """Upload a host array as a new contiguous tensor (values converted to `dtype`)."""
    if dtype.is_fixed:
        raise DTypeError(f"casting values to the fixed-point dtype {dtype} is refused: build fixed-point tensors "
                         f"from raw int16 values with rumus.fixed.tensor, or convert explicitly with "
                         f"rumus.fixed.quantize / rumus.fixed.from_float")
    if dtype.is_packed:
        raise DTypeError(f"{dtype} tensors have their own constructors (see rumus.fixed / rumus.quant)")
    shape = np.shape(array)
    check_size("tensor", shape, max(dtype.itemsize, 4 if dtype.name == "bfloat16" else 1))  # a broadcast view's copy
    with host_memory("tensor"):
        if dtype.name == "bfloat16":
            host = _bfloat16_bits(np.asarray(array, dtype=np.float32))
        else:
            host = np.asarray(array, dtype=dtype.numpy, order="C")  # keeps 0-d arrays 0-d
    backend = _runtime.backend(device.backend)
    buf = backend.from_numpy(device, host.reshape(-1), dtype)
    t = make_tensor(Storage(buf, device, dtype, backend, host.size), tuple(host.shape))
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_storage(host: np.ndarray, dtype: DType, device: Device | str | None = None) -> Tensor:
    """A tensor whose storage is exactly `host` (already in dtype.numpy layout; packed dtypes allowed)."""
    dev = _device(device)
    host = np.asarray(host, dtype=dtype.numpy, order="C")
    backend = _runtime.backend(dev.backend)
    buf = backend.from_numpy(dev, host.reshape(-1), dtype)
    return make_tensor(Storage(buf, dev, dtype, backend, host.size), tuple(host.shape))


def _rebuild(host: np.ndarray, dtype: DType, device: str, requires_grad: bool) -> Tensor:
    t = from_storage(host, dtype, device)
    return t.requires_grad_(True) if requires_grad else t


def _infer_dtype(data: Any, arr: np.ndarray) -> DType:
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        if arr.dtype == np.float16:
            return parse_dtype("float16")
        return from_numpy_dtype(arr.dtype)
    if arr.dtype.kind == "b":
        return rbool
    if arr.dtype.kind in "iu":
        return int64
    if arr.dtype.kind == "f" or arr.size == 0:
        return float32
    raise DTypeError(f"cannot make a tensor from {type(data).__name__} with numpy dtype {arr.dtype}")


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor copied from Python numbers, nested lists, numpy arrays or another tensor."""
    if isinstance(data, Tensor):
        out = data.detach().to(dtype=dtype, device=device) if dtype or device else data.detach().clone()
        if out._storage is data._storage:
            out = out.clone()
        return out.requires_grad_(requires_grad) if requires_grad else out
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _nested_numpy(data)
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise RumusError(f"cannot make a tensor from {type(data).__name__}: {exc}") from None
    if arr.dtype == object:
        raise RumusError("cannot make a tensor from ragged nested sequences: every row needs the same length")
    dt = parse_dtype(dtype) if dtype is not None else _infer_dtype(data, arr)
    return from_host(arr, dt, _device(device), requires_grad)


def _flat(seq: Any) -> list[Any]:
    out = []
    for x in seq:
        out.extend(_flat(x) if isinstance(x, (list, tuple)) else [x])
    return out


def _nested_numpy(seq: Any) -> Any:
    if isinstance(seq, Tensor):
        return seq.numpy()
    if isinstance(seq, (list, tuple)):
        return [_nested_numpy(x) for x in seq]
    return seq


def from_numpy(array: np.ndarray, device: Any = None) -> Tensor:
    """A tensor with the array's dtype and contents (copied to the device's memory)."""
    if not isinstance(array, np.ndarray):
        raise RumusError(f"from_numpy expects a numpy array, got {type(array).__name__}")
    return from_host(array, _infer_dtype(array, array), _device(device))


def full(size: Any, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` filled with `fill_value`."""
    shape = _shape((size,), "full")
    if dtype is None:
        dtype = rbool if isinstance(fill_value, bool) else int64 if isinstance(fill_value, int) else float32
    dt, dev = parse_dtype(dtype), _device(device)
    out = _sized(shape, dt, lambda: _op("fill")(shape=shape, value=fill_value, dtype=dt.name, device=dev))
    return out.requires_grad_(True) if requires_grad else out


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
          **kw: Any) -> Tensor:
    """A tensor of `size` filled with zeros."""
    size = _size_arg(size, kw, "zeros")
    return full(_shape(size, "zeros"), 0, dtype=dtype or float32, device=device, requires_grad=requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
         **kw: Any) -> Tensor:
    """A tensor of `size` filled with ones."""
    size = _size_arg(size, kw, "ones")
    return full(_shape(size, "ones"), 1, dtype=dtype or float32, device=device, requires_grad=requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
          **kw: Any) -> Tensor:
    """An uninitialised tensor of `size`: its contents are unspecified, write before reading."""
    size = _size_arg(size, kw, "empty")
    from ._dispatch import empty as _empty
    shape, dt = _shape(size, "empty"), parse_dtype(dtype or float32)
    out = _sized(shape, dt, lambda: _empty(shape, dt, _device(device)))
    return out.requires_grad_(True) if requires_grad else out


def zeros_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros with `x`'s shape, dtype and device."""
    return zeros(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones with `x`'s shape, dtype and device."""
    return ones(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value: Any, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """A tensor with `x`'s shape, dtype and device filled with `fill_value`."""
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def empty_like(t: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    """An uninitialised tensor with `x`'s shape, dtype and device."""
    return empty(t.shape, dtype=dtype or t.dtype, device=device or t.device)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values from `start` to `end` (exclusive) in steps of `step`, as torch.arange."""
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, (str, bytes)) or not isinstance(v, (int, float, np.number)):
            raise ArgumentTypeError(f"arange: {name} must be a number, got {type(v).__name__} {v!r}")
        if not math.isfinite(v):
            raise ShapeError(f"arange: {name} must be finite, got {v}")
    if step == 0:
        raise ShapeError("arange: step must be non-zero")
    all_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    dt = parse_dtype(dtype) if dtype is not None else (int64 if all_int else float32)
    count = max(0, math.ceil((end - start) / step))
    return _sized((count,), dt, lambda: from_host(
        np.arange(start, end, step, dtype=np.float64 if not all_int else np.int64), dt, _device(device), requires_grad))


def linspace(start: float, end: float, steps: int, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from `start` to `end`, both included."""
    steps = _size_int(steps, "steps", "linspace")
    if steps < 0:
        raise ShapeError(f"linspace: steps must be non-negative, got {steps}")
    dt = parse_dtype(dtype or float32)
    return _sized((steps,), dt, lambda: from_host(np.linspace(start, end, steps), dt, _device(device), requires_grad))


def eye(n: int, m: int | None = None, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A 2-D identity matrix of `n` rows (and `m` columns)."""
    n = _size_int(n, "n", "eye")
    m = n if m is None else _size_int(m, "m", "eye")
    if n < 0 or m < 0:
        raise ShapeError(f"eye: n and m must be >= 0, got {n}, {m}")
    dt = parse_dtype(dtype or float32)
    return _sized((n, m), dt, lambda: from_host(np.eye(n, m), dt, _device(device), requires_grad))


def _gen(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator).rng


def rand(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False, **kw: Any) -> Tensor:
    """Uniform random values in [0, 1) of `size`, from the default generator or `generator`."""
    size = _size_arg(size, kw, "rand")
    shape, dt = _shape(size, "rand"), parse_dtype(dtype or float32)
    return _sized(shape, dt, lambda: from_host(_gen(generator).random(shape), dt, _device(device), requires_grad))


def randn(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False, **kw: Any) -> Tensor:
    """Standard normal random values of `size`, from the default generator or `generator`."""
    size = _size_arg(size, kw, "randn")
    shape, dt = _shape(size, "randn"), parse_dtype(dtype or float32)
    return _sized(shape, dt, lambda: from_host(_gen(generator).standard_normal(shape), dt, _device(device),
                                              requires_grad))


def randint(low: int, high: Any = None, size: Sequence[int] = (), generator: Generator | None = None,
            dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Random integers in [`low`, `high`) of `size` (int64 unless `dtype` says otherwise); torch's overloads
    randint(high, size) and randint(low, high, size), `size` also as a keyword."""
    if isinstance(high, (tuple, list)) or (hasattr(high, "__len__") and not isinstance(high, (str, bytes))):
        low, high, size = 0, low, high  # randint(high, size)
    elif high is None:
        low, high = 0, low
    low, high = _size_int(low, "low", "randint"), _size_int(high, "high", "randint")
    if high <= low:
        raise ShapeError(f"randint: high ({high}) must be greater than low ({low})")
    shape, dt = _shape((size,), "randint"), parse_dtype(dtype or int64)
    return _sized(shape, dt, lambda: from_host(_gen(generator).integers(low, high, size=shape), dt, _device(device)))


def rand_like(t: Tensor, generator: Generator | None = None) -> Tensor:
    """Uniform random values in [0, 1) with `x`'s shape, dtype and device."""
    return rand(t.shape, generator=generator, dtype=t.dtype, device=t.device)


def randn_like(t: Tensor, generator: Generator | None = None) -> Tensor:
    """Standard normal random values with `x`'s shape, dtype and device."""
    return randn(t.shape, generator=generator, dtype=t.dtype, device=t.device)


def randperm(n: int, generator: Generator | None = None, device: Any = None) -> Tensor:
    """A random permutation of 0 .. n-1 (int64)."""
    n = _size_int(n, "n", "randperm")
    if n < 0:
        raise ShapeError(f"randperm: n must be >= 0, got {n}")
    return _sized((n,), int64, lambda: from_host(_gen(generator).permutation(n), int64, _device(device)))
